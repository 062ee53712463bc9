"""Shared by the worker tests: import path, in-process servers and HTTP shortcuts."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Tuple

WORKERS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if WORKERS not in sys.path:
    sys.path.insert(0, WORKERS)

import http_util  # noqa: E402
import rollout_server  # noqa: E402
import trainer  # noqa: E402


def start_engine(*flags: str) -> http_util.JsonServer:
    """A rollout server on a free port, served by a background thread of this process."""
    return rollout_server.build_server(
        rollout_server.parse_args(["--port", "0"] + list(flags))).start()


def start_trainer(*flags: str) -> http_util.JsonServer:
    state = trainer.Trainer(trainer.parse_args(["--port", "0"] + list(flags)))
    return http_util.JsonServer("127.0.0.1", 0, state.routes(), trainer._error_body).start()


def call(server: http_util.JsonServer, method: str, path: str,
         body: Optional[Dict[str, Any]] = None) -> Tuple[int, Any]:
    return http_util.request_json(method, server.url(path), body, timeout=60)


def ok(server: http_util.JsonServer, method: str, path: str,
       body: Optional[Dict[str, Any]] = None) -> Any:
    status, reply = call(server, method, path, body)
    if status != 200:
        raise AssertionError(f"{method} {path}: HTTP {status}: {reply}")
    return reply


def vllm_generate(server: http_util.JsonServer, prompt: List[int], **extra: Any) -> Any:
    body = {"prompt": prompt, "max_tokens": 8, "logprobs": 0, "return_token_ids": True}
    body.update(extra)
    return ok(server, "POST", "/v1/completions", body)
