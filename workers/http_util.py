"""A small JSON-over-HTTP server and client on the standard library, shared by the workers.

The server is a ThreadingHTTPServer speaking HTTP/1.1 with keep-alive (libra's libcurl transport
reuses connections). Each route is a function from a Request to a JSON-able reply; raising
HttpError answers with that status and an error body. Bodies must be strict JSON objects.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple


class HttpError(Exception):
    """Ends a request with `status` and an error body carrying `message`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    def __init__(self, method: str, path: str, query: Dict[str, List[str]],
                 body: Optional[Dict[str, Any]]) -> None:
        self.method = method
        self.path = path
        self.query = query
        # The JSON object sent, or {} when the body was empty.
        self.body = body if body is not None else {}


# A route's reply with no body at all (some engine endpoints answer a bare 200).
NO_BODY = object()

# A route answers a Request with a JSON-able value or NO_BODY (status 200), or (status, value).
Route = Callable[[Request], Any]
# Builds the error body of a failed request from (status, message).
ErrorBody = Callable[[int, str], Any]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_body(raw: bytes) -> Optional[Dict[str, Any]]:
    if not raw.strip():
        return None
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as error:
        raise HttpError(400, f"the body is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise HttpError(400, "the body must be a JSON object")
    return value


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops connections when libra opens many at once (the
    # client then retries the SYN a second later).
    request_queue_size = 1024
    daemon_threads = True


class JsonServer:
    """Serves `routes`, keyed by (method, path), on host:port (port 0 picks a free one)."""

    def __init__(self, host: str, port: int, routes: Dict[Tuple[str, str], Route],
                 error_body: ErrorBody, verbose: bool = False) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
                if verbose:
                    super().log_message(format, *args)

            def _serve(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                status, payload = 200, None
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    raw = self.rfile.read(length) if length > 0 else b""
                    route = routes.get((method, url.path))
                    if route is None:
                        allowed = [m for (m, p) in routes if p == url.path]
                        if allowed:
                            raise HttpError(405, f"{method} {url.path}: use {', '.join(allowed)}")
                        raise HttpError(404, f"no route {method} {url.path}")
                    request = Request(method, url.path, urllib.parse.parse_qs(url.query),
                                      _parse_body(raw))
                    reply = route(request)
                    if isinstance(reply, tuple):
                        status, payload = reply
                    else:
                        payload = reply
                except HttpError as error:
                    status, payload = error.status, error_body(error.status, error.message)
                except Exception as error:  # A bug in a route: answer 500 rather than hang up.
                    status = 500
                    payload = error_body(500, f"{type(error).__name__}: {error}")
                data = b""
                self.send_response(status)
                if payload is not NO_BODY:
                    data = json.dumps(payload, allow_nan=False).encode("utf-8")
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (stdlib name)
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                self._serve("POST")

        self._httpd = _Server((host, port), Handler)
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.1)

    def start(self) -> "JsonServer":
        """Serves on a background thread (for tests)."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()


# ---- Validation of request bodies ---------------------------------------------------------------

_MISSING = object()


def field(body: Dict[str, Any], name: str, kind: str, default: Any = _MISSING) -> Any:
    """Member `name` of a request body, checked to be of `kind`: "int", "number", "bool", "str",
    "ints" (list of int), "numbers", "list", "object". Raises HttpError 400 naming the field."""
    if name not in body or body[name] is None:
        if default is _MISSING:
            raise HttpError(400, f"missing field '{name}'")
        return default
    value = body[name]
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
        and math.isfinite(v),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "ints": lambda v: isinstance(v, list)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
        "numbers": lambda v: isinstance(v, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in v),
        "list": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }[kind](value)
    if not ok:
        raise HttpError(400, f"field '{name}' must be {kind}, got {json.dumps(value)[:80]}")
    return value


# ---- Client -------------------------------------------------------------------------------------

def request_json(method: str, url: str, payload: Optional[Dict[str, Any]] = None,
                 timeout: float = 60.0) -> Tuple[int, Any]:
    """Sends a request and returns (status, parsed JSON body or the raw text). Raises OSError
    when no reply arrives."""
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, raw = reply.status, reply.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    text = raw.decode("utf-8", errors="replace")
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def post(url: str, payload: Optional[Dict[str, Any]] = None, timeout: float = 60.0) -> Any:
    """POSTs and returns the JSON reply; raises RuntimeError on a status other than 200."""
    status, body = request_json("POST", url, payload if payload is not None else {}, timeout)
    if status != 200:
        raise RuntimeError(f"POST {url}: HTTP {status}: {body}")
    return body


def wait_healthy(url: str, timeout: float = 60.0) -> None:
    """Polls GET `url` until it answers 200; raises TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = "no reply"
    while time.monotonic() < deadline:
        try:
            status, body = request_json("GET", url, None, timeout=2.0)
            if status == 200:
                return
            last = f"HTTP {status}: {body}"
        except OSError as error:
            last = str(error)
        time.sleep(0.05)
    raise TimeoutError(f"{url} not healthy after {timeout} s ({last})")
