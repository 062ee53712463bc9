"""A CPU rollout engine that speaks the HTTP dialects libra drives: vLLM's and SGLang's.

It serves the tiny model (tiny_lm.py) with real sampling: token ids in and out, the logprob of each
sampled token, stop tokens, max_tokens, abort with partial output, releasing and resuming memory
(vLLM sleep / wake_up, SGLang release / resume_memory_occupation), weight reloads from disk, and
weight updates broadcast by the trainer over torch.distributed (gloo), in which the trainer is
rank 0 and this engine (one "GPU") is rank `rank_offset`. Field names follow the real engines
(docs/cluster.md, "Engines"), so libra's client is tested against the same shapes it meets on GPUs.

Usage: rollout_server.py --port 8000 [--dialect vllm|sglang|both] [--model weights.pt]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
import torch.distributed as dist

import http_util
import tiny_lm
import toy_task
from http_util import NO_BODY, HttpError, Request, field


class Generation:
    """The outcome of one generate request."""

    def __init__(self) -> None:
        self.token_ids: List[int] = []
        self.logprobs: List[float] = []
        # "stop", "length" or "abort".
        self.finish = "length"
        # The stop token that ended generation (finish == "stop").
        self.matched: Optional[int] = None
        self.seconds = 0.0


class Engine:
    """The model and the engine's state, shared by both dialects.

    Generation holds the model lock one token at a time, so weight swaps wait for the token in
    progress and requests interleave; aborts are noticed between tokens.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.model = tiny_lm.build_model(args.seed, args.max_model_len)
        self.model_path: Optional[str] = args.model
        if args.model:
            tiny_lm.load_weights(self.model, args.model)
        self.served_name: str = args.served_model_name
        self.token_delay_s = args.token_delay_ms / 1000.0
        self.weight_version = "0"
        self.model_lock = threading.Lock()
        self.state_lock = threading.Lock()
        # Tags of the memory released ("weights", "kv_cache"); generation needs none released.
        self.released: Set[str] = set()
        # vLLM sleep level 2 dropped the weights: they must be reloaded before generating.
        self.weights_discarded = False
        # Abort flags of the requests in flight, by request id.
        self.running: Dict[str, threading.Event] = {}
        self.group: Optional[str] = None
        self._seed_base = args.seed
        self._seed_counter = 0

    # ---- Generation -----------------------------------------------------------------------------

    def check_prompt(self, prompt: List[int], max_tokens: int) -> None:
        if not prompt:
            raise HttpError(400, "the prompt is empty")
        bad = [t for t in prompt if not 0 <= t < tiny_lm.VOCAB_SIZE]
        if bad:
            raise HttpError(400, f"token id {bad[0]} is outside the vocabulary "
                                 f"[0, {tiny_lm.VOCAB_SIZE})")
        if max_tokens < 1:
            raise HttpError(400, f"max_tokens must be at least 1, got {max_tokens}")
        if len(prompt) + max_tokens > self.model.max_len:
            raise HttpError(400, f"This model's maximum context length is {self.model.max_len} "
                                 f"tokens; the request has {len(prompt)} prompt tokens and asks "
                                 f"for {max_tokens} more")

    def generate(self, rid: str, prompt: List[int], max_tokens: int, temperature: float,
                 top_p: float, stop_token_ids: List[int], ignore_eos: bool,
                 seed: Optional[int]) -> Generation:
        self.check_prompt(prompt, max_tokens)
        if temperature < 0 or not 0 < top_p <= 1:
            raise HttpError(400, f"temperature {temperature} must be >= 0 and top_p {top_p} "
                                 "in (0, 1]")
        stops = set(stop_token_ids)
        if not ignore_eos:
            stops.add(toy_task.EOS)
        abort = threading.Event()
        with self.state_lock:
            if self.released:
                raise HttpError(503, f"the engine's memory is released "
                                     f"({', '.join(sorted(self.released))}); resume it first")
            if self.weights_discarded:
                raise HttpError(503, "the weights were discarded (sleep level 2); reload them")
            if rid in self.running:
                raise HttpError(400, f"request id {rid!r} is already running")
            self.running[rid] = abort
            if seed is None:
                self._seed_counter += 1
                seed = self._seed_base * 1_000_003 + self._seed_counter
        generator = torch.Generator().manual_seed(seed)
        result = Generation()
        started = time.monotonic()
        ids = list(prompt)
        try:
            for _ in range(max_tokens):
                if abort.is_set():
                    result.finish = "abort"
                    break
                with self.model_lock, torch.no_grad():
                    logits = self.model(torch.tensor([ids]))[0, -1]
                token, logprob = _sample(logits, temperature, top_p, generator)
                ids.append(token)
                result.token_ids.append(token)
                result.logprobs.append(logprob)
                if token in stops:
                    result.finish, result.matched = "stop", token
                    break
                if self.token_delay_s > 0:
                    abort.wait(self.token_delay_s)
        finally:
            with self.state_lock:
                del self.running[rid]
        result.seconds = time.monotonic() - started
        return result

    def abort(self, rids: Optional[List[str]]) -> int:
        """Aborts the requests `rids` (all when None); returns how many were running."""
        with self.state_lock:
            targets = list(self.running) if rids is None else [r for r in rids
                                                              if r in self.running]
            for rid in targets:
                self.running[rid].set()
            return len(targets)

    def in_flight(self) -> int:
        with self.state_lock:
            return len(self.running)

    # ---- Memory -----------------------------------------------------------------------------

    def release(self, tags: List[str], discard_weights: bool) -> None:
        tags = _check_tags(tags)
        with self.state_lock:
            self.released.update(tags)
            if discard_weights and "weights" in tags:
                self.weights_discarded = True

    def resume(self, tags: List[str]) -> None:
        tags = _check_tags(tags)
        with self.state_lock:
            self.released.difference_update(tags)

    # ---- Weights ------------------------------------------------------------------------------

    def load_from_disk(self, path: str, version: Optional[str]) -> None:
        fresh = tiny_lm.build_model(0, self.model.max_len)
        try:
            tiny_lm.load_weights(fresh, path)
        except ValueError as error:
            raise HttpError(400, str(error)) from error
        self._install(fresh.state_dict(), version)

    def init_group(self, address: str, port: int, rank: int, world_size: int, group_name: str,
                   backend: str, timeout_s: float) -> None:
        if backend != "gloo":
            raise HttpError(400, f"backend {backend!r}: the CPU engine speaks gloo only")
        if not 0 < rank < world_size:
            raise HttpError(400, f"rank_offset {rank} must be in [1, world_size {world_size})")
        with self.state_lock:
            if dist.is_initialized():
                dist.destroy_process_group()
                self.group = None
        try:
            dist.init_process_group("gloo", init_method=f"tcp://{address}:{port}", rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        except (RuntimeError, ValueError) as error:
            raise HttpError(400, f"init_process_group failed: {error}") from error
        with self.state_lock:
            self.group = group_name

    def destroy_group(self, group_name: str) -> None:
        with self.state_lock:
            if self.group != group_name:
                raise HttpError(400, f"not in weight update group {group_name!r}")
            dist.destroy_process_group()
            self.group = None

    def receive_broadcast(self, group_name: str, names: List[str], dtypes: List[str],
                          shapes: List[List[int]], version: Optional[str]) -> None:
        if self.group != group_name:
            raise HttpError(400, f"not in weight update group {group_name!r} "
                                 f"(current: {self.group!r})")
        mismatch = tiny_lm.check_tensor_specs(self.model, names, dtypes, shapes)
        if mismatch:
            raise HttpError(400, mismatch)
        received = {}
        try:
            for name, dtype, shape in zip(names, dtypes, shapes):
                tensor = torch.empty(shape, dtype=tiny_lm.DTYPES_BY_NAME[dtype])
                dist.broadcast(tensor, src=0)
                received[name] = tensor
        except RuntimeError as error:
            raise HttpError(400, f"broadcast failed after {len(received)} tensors: "
                                 f"{error}") from error
        self._install(received, version)

    def _install(self, state: Dict[str, torch.Tensor], version: Optional[str]) -> None:
        with self.model_lock:
            self.model.load_state_dict(state)
        with self.state_lock:
            self.weights_discarded = False
            if version is not None:
                self.weight_version = version


def _sample(logits: torch.Tensor, temperature: float, top_p: float,
            generator: torch.Generator) -> Tuple[int, float]:
    """Samples a token; returns it with its logprob under the distribution sampled from."""
    if temperature == 0:
        logprobs = torch.log_softmax(logits, -1)
        token = int(torch.argmax(logprobs))
        return token, float(logprobs[token])
    logprobs = torch.log_softmax(logits / temperature, -1)
    probs = logprobs.exp()
    if top_p < 1:
        order = torch.argsort(probs, descending=True)
        keep = torch.cumsum(probs[order], 0) - probs[order] < top_p
        mask = torch.zeros_like(probs, dtype=torch.bool)
        mask[order[keep]] = True
        probs = torch.where(mask, probs, torch.zeros_like(probs))
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(logprobs[token])


def _check_tags(tags: List[str]) -> List[str]:
    known = ["weights", "kv_cache"]
    for tag in tags:
        if tag not in known:
            raise HttpError(400, f"unknown memory tag {tag!r} (known: {', '.join(known)})")
    return tags or known


def _text(tokens: List[int]) -> str:
    return " ".join(toy_task.token_name(t) for t in tokens)


# ---- vLLM dialect -------------------------------------------------------------------------------

def _vllm_error(status: int, message: str) -> Dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError" if status < 500
                      else "InternalServerError", "code": status}}


def vllm_routes(engine: Engine) -> Dict[Tuple[str, str], http_util.Route]:
    def completions(request: Request) -> Any:
        body = request.body
        model = field(body, "model", "str", None)
        if model is not None and model != engine.served_name:
            raise HttpError(404, f"The model `{model}` does not exist.")
        prompt = body.get("prompt")
        if not (isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool)
                                                 for t in prompt)):
            raise HttpError(400, "prompt must be a list of token ids")
        if field(body, "n", "int", 1) != 1:
            raise HttpError(400, "n must be 1")
        logprobs_k = field(body, "logprobs", "int", None)
        rid = field(body, "request_id", "str", None) or uuid.uuid4().hex
        out = engine.generate(
            rid, prompt, field(body, "max_tokens", "int", 16),
            float(field(body, "temperature", "number", 1.0)),
            float(field(body, "top_p", "number", 1.0)),
            field(body, "stop_token_ids", "ints", []), field(body, "ignore_eos", "bool", False),
            field(body, "seed", "int", None))
        choice: Dict[str, Any] = {
            "index": 0,
            "text": _text(out.token_ids),
            "logprobs": None,
            "finish_reason": out.finish,
            "stop_reason": out.matched,
        }
        if logprobs_k is not None:
            names = [toy_task.token_name(t) for t in out.token_ids]
            offsets, position = [], 0
            for name in names:
                offsets.append(position)
                position += len(name) + 1
            choice["logprobs"] = {
                "text_offset": offsets,
                "token_logprobs": out.logprobs,
                "tokens": names,
                "top_logprobs": [{name: lp} for name, lp in zip(names, out.logprobs)],
            }
        if field(body, "return_token_ids", "bool", False):
            choice["token_ids"] = out.token_ids
            choice["prompt_token_ids"] = prompt
        return {
            "id": f"cmpl-{rid}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": engine.served_name,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out.token_ids),
                      "total_tokens": len(prompt) + len(out.token_ids)},
        }

    def sleep(request: Request) -> Any:
        level = int(request.query.get("level", ["1"])[0])
        if level not in (1, 2):
            raise HttpError(400, f"level must be 1 or 2, got {level}")
        engine.abort(None)  # mode=abort, vLLM's default
        engine.release(request.query.get("tags", []), discard_weights=level == 2)
        return NO_BODY

    def wake_up(request: Request) -> Any:
        engine.resume(request.query.get("tags", []))
        return NO_BODY

    def is_sleeping(request: Request) -> Any:
        del request
        return {"is_sleeping": bool(engine.released)}

    def abort_requests(request: Request) -> Any:
        ids = field(request.body, "request_ids", "list", [])
        return {"status": "aborted", "aborted": engine.abort(ids or None)}

    def collective_rpc(request: Request) -> Any:
        method = field(request.body, "method", "str")
        if method != "reload_weights":
            raise HttpError(400, f"unsupported method {method!r} (supported: reload_weights)")
        if engine.model_path is None:
            raise HttpError(400, "reload_weights: the engine was started without --model")
        engine.load_from_disk(engine.model_path, None)
        return {"results": [None]}

    def init_weight_transfer_engine(request: Request) -> Any:
        info = field(request.body, "init_info", "object")
        engine.init_group(field(info, "master_address", "str"), field(info, "master_port", "int"),
                          field(info, "rank_offset", "int"), field(info, "world_size", "int"),
                          "weight_update_group", field(info, "backend", "str", "gloo"),
                          float(field(info, "timeout_s", "number", 120)))
        return {"status": "ok"}

    def update_weights(request: Request) -> Any:
        info = field(request.body, "update_info", "object")
        engine.receive_broadcast("weight_update_group", field(info, "names", "list"),
                                 field(info, "dtype_names", "list"), field(info, "shapes", "list"),
                                 None)
        return {"status": "ok"}

    def models(request: Request) -> Any:
        del request
        return {"object": "list", "data": [{"id": engine.served_name, "object": "model"}]}

    return {
        ("POST", "/v1/completions"): completions,
        ("POST", "/sleep"): sleep,
        ("POST", "/wake_up"): wake_up,
        ("GET", "/is_sleeping"): is_sleeping,
        ("POST", "/abort_requests"): abort_requests,
        ("POST", "/collective_rpc"): collective_rpc,
        ("POST", "/init_weight_transfer_engine"): init_weight_transfer_engine,
        ("POST", "/update_weights"): update_weights,
        ("GET", "/v1/models"): models,
    }


# ---- SGLang dialect -----------------------------------------------------------------------------

def _sglang_error(status: int, message: str) -> Dict[str, Any]:
    return {"error": {"message": message, "code": status}}


def _sglang_call(action: Any) -> Any:
    """Runs a weight operation and answers as SGLang does: {success, message}, 400 on failure."""
    try:
        action()
    except HttpError as error:
        return 400, {"success": False, "message": error.message}
    return {"success": True, "message": "Succeeded."}


def sglang_routes(engine: Engine) -> Dict[Tuple[str, str], http_util.Route]:
    def generate(request: Request) -> Any:
        body = request.body
        prompt = field(body, "input_ids", "ints")
        params = field(body, "sampling_params", "object", {})
        rid = field(body, "rid", "str", None) or uuid.uuid4().hex
        out = engine.generate(
            rid, prompt, field(params, "max_new_tokens", "int", 128),
            float(field(params, "temperature", "number", 1.0)),
            float(field(params, "top_p", "number", 1.0)),
            field(params, "stop_token_ids", "ints", []),
            field(params, "ignore_eos", "bool", False),
            field(params, "sampling_seed", "int", None))
        if out.finish == "stop":
            finish: Dict[str, Any] = {"type": "stop", "matched": out.matched}
        elif out.finish == "length":
            finish = {"type": "length", "length": len(out.token_ids)}
        else:
            finish = {"type": "abort", "message": "Abort in waiting queue"
                      if not out.token_ids else "Aborted by AbortReq."}
        meta: Dict[str, Any] = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": len(prompt),
            "completion_tokens": len(out.token_ids),
            "cached_tokens": 0,
            "weight_version": engine.weight_version,
            "e2e_latency": out.seconds,
        }
        if field(body, "return_logprob", "bool", False):
            meta["output_token_logprobs"] = [[lp, t, None]
                                             for lp, t in zip(out.logprobs, out.token_ids)]
        return {"text": _text(out.token_ids), "output_ids": out.token_ids, "meta_info": meta}

    def abort_request(request: Request) -> Any:
        if field(request.body, "abort_all", "bool", False):
            engine.abort(None)
        else:
            engine.abort([field(request.body, "rid", "str")])
        return NO_BODY

    def release(request: Request) -> Any:
        if engine.in_flight():
            raise HttpError(400, "release_memory_occupation: requests are still running")
        engine.release(field(request.body, "tags", "list", []), discard_weights=False)
        return NO_BODY

    def resume(request: Request) -> Any:
        engine.resume(field(request.body, "tags", "list", []))
        return NO_BODY

    def update_from_disk(request: Request) -> Any:
        path = field(request.body, "model_path", "str")
        version = field(request.body, "weight_version", "str", None)
        if field(request.body, "abort_all_requests", "bool", False):
            engine.abort(None)
        reply = _sglang_call(lambda: engine.load_from_disk(path, version))
        if isinstance(reply, dict):
            reply["num_paused_requests"] = 0
        return reply

    def init_group(request: Request) -> Any:
        body = request.body
        return _sglang_call(lambda: engine.init_group(
            field(body, "master_address", "str"), field(body, "master_port", "int"),
            field(body, "rank_offset", "int"), field(body, "world_size", "int"),
            field(body, "group_name", "str", "weight_update_group"),
            field(body, "backend", "str", "nccl"), float(field(body, "timeout_s", "number", 120))))

    def update_from_distributed(request: Request) -> Any:
        body = request.body
        return _sglang_call(lambda: engine.receive_broadcast(
            field(body, "group_name", "str", "weight_update_group"), field(body, "names", "list"),
            field(body, "dtypes", "list"), field(body, "shapes", "list"),
            field(body, "weight_version", "str", None)))

    def destroy_group(request: Request) -> Any:
        name = field(request.body, "group_name", "str", "weight_update_group")
        return _sglang_call(lambda: engine.destroy_group(name))

    def model_info(request: Request) -> Any:
        del request
        return {"model_path": engine.model_path or "", "is_generation": True,
                "weight_version": engine.weight_version}

    def weight_version(request: Request) -> Any:
        del request
        return {"weight_version": engine.weight_version}

    def load(request: Request) -> Any:
        del request
        return [{"dp_rank": 0, "num_running_reqs": engine.in_flight(), "num_waiting_reqs": 0}]

    return {
        ("POST", "/generate"): generate,
        ("POST", "/abort_request"): abort_request,
        ("POST", "/release_memory_occupation"): release,
        ("POST", "/resume_memory_occupation"): resume,
        ("POST", "/update_weights_from_disk"): update_from_disk,
        ("POST", "/init_weights_update_group"): init_group,
        ("POST", "/update_weights_from_distributed"): update_from_distributed,
        ("POST", "/destroy_weights_update_group"): destroy_group,
        ("GET", "/get_model_info"): model_info,
        ("GET", "/get_weight_version"): weight_version,
        ("GET", "/get_load"): load,
        ("GET", "/health_generate"): lambda request: NO_BODY,
    }


def build_server(args: argparse.Namespace) -> http_util.JsonServer:
    engine = Engine(args)
    routes: Dict[Tuple[str, str], http_util.Route] = {("GET", "/health"): lambda r: NO_BODY}
    error_body = _sglang_error if args.dialect == "sglang" else _vllm_error
    if args.dialect in ("vllm", "both"):
        routes.update(vllm_routes(engine))
    if args.dialect in ("sglang", "both"):
        routes.update(sglang_routes(engine))
    return http_util.JsonServer(args.host, args.port, routes, error_body, args.verbose)


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="libra's CPU rollout engine (vLLM / SGLang API)")
    parser.add_argument("--dialect", choices=["vllm", "sglang", "both"], default="both")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="0 picks a free port")
    parser.add_argument("--model", help="weights file to serve; vLLM's reload_weights rereads it "
                                        "(default: fresh weights from --seed)")
    parser.add_argument("--served-model-name", default="tiny-lm")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and sampling")
    parser.add_argument("--max-model-len", type=int, default=tiny_lm.DEFAULT_MAX_LEN)
    parser.add_argument("--token-delay-ms", type=float, default=0.0,
                        help="sleep after each generated token (to test aborts)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser.parse_args(argv)


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    server = build_server(args)
    print(f"rollout server ({args.dialect}) listening on http://{args.host}:{server.port}",
          flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
