"""The CPU trainer: libra's trainer protocol (docs/cluster.md, "Trainer protocol") over the tiny
model, with real GRPO updates.

Each /train_step is one policy-gradient update on a batch of sequences whose advantages libra has
already normalised per GRPO group: a PPO-clipped importance-weighted loss against the behaviour
logprobs the engine returned, plus (with --kl-coef > 0) a k3 KL penalty against the reference
model (the initial weights), averaged over the trained tokens; Adam; gradient norm clipped to
--max-grad-norm. After step k the trainer holds version initial+k+1. Weights reach the engines on
disk (/save_weights) or by a torch.distributed broadcast in which the trainer is rank 0
(/init_weight_update_group, /broadcast_weights).

Usage: trainer.py --port 8100 [--weights init.pt] [--lr 1e-3] [--kl-coef 0]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

import http_util
import tiny_lm
from http_util import HttpError, Request, field


def _error_body(status: int, message: str) -> Dict[str, Any]:
    del status
    return {"error": message}


class Sequence:
    """One trained sequence, validated."""

    def __init__(self, index: int, body: Any, max_len: int) -> None:
        where = f"sequences[{index}]"
        if not isinstance(body, dict):
            raise HttpError(400, f"{where} must be an object")
        try:
            self.prompt_ids: List[int] = field(body, "prompt_ids", "ints")
            self.completion_ids: List[int] = field(body, "completion_ids", "ints")
            self.logprobs: List[float] = field(body, "logprobs", "numbers")
            self.loss_mask: List[int] = field(body, "loss_mask", "ints")
            self.advantage = float(field(body, "advantage", "number"))
        except HttpError as error:
            raise HttpError(400, f"{where}: {error.message}") from error
        if not self.prompt_ids:
            raise HttpError(400, f"{where}: prompt_ids is empty")
        if not self.completion_ids:
            raise HttpError(400, f"{where}: completion_ids is empty")
        length = len(self.completion_ids)
        if len(self.logprobs) != length or len(self.loss_mask) != length:
            raise HttpError(400, f"{where}: completion_ids, logprobs and loss_mask must have one "
                                 f"entry per token ({length}, {len(self.logprobs)}, "
                                 f"{len(self.loss_mask)})")
        if any(not 0 <= t < tiny_lm.VOCAB_SIZE for t in self.prompt_ids + self.completion_ids):
            raise HttpError(400, f"{where}: token id outside [0, {tiny_lm.VOCAB_SIZE})")
        if any(bit not in (0, 1) for bit in self.loss_mask):
            raise HttpError(400, f"{where}: loss_mask entries must be 0 or 1")
        if any(lp > 1e-4 for lp in self.logprobs):
            raise HttpError(400, f"{where}: a logprob is positive")
        if len(self.prompt_ids) + length > max_len:
            raise HttpError(400, f"{where}: {len(self.prompt_ids) + length} tokens exceed the "
                                 f"model's {max_len}")


class Trainer:
    """The trainer's state; every route takes the lock, so operations run one at a time."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.model = tiny_lm.build_model(args.seed, args.max_model_len)
        if args.weights:
            tiny_lm.load_weights(self.model, args.weights)
        self.reference = copy.deepcopy(self.model)
        for parameter in self.reference.parameters():
            parameter.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.kl_coef = args.kl_coef
        self.clip = args.clip
        self.max_grad_norm = args.max_grad_norm
        self.version = args.version
        self.replicas: List[str] = [args.replica]
        self.group: Optional[str] = None
        self.steps = 0
        self.tokens = 0
        self.sequences = 0
        self.train_seconds = 0.0
        self.last_step: Optional[Dict[str, Any]] = None
        self.lock = threading.Lock()

    # ---- Routes ---------------------------------------------------------------------------------

    def train_step(self, request: Request) -> Dict[str, Any]:
        step = field(request.body, "step", "int")
        raw = field(request.body, "sequences", "list")
        if not raw:
            raise HttpError(400, "sequences is empty")
        sequences = [Sequence(i, s, self.model.max_len) for i, s in enumerate(raw)]
        trained = sum(sum(s.loss_mask) for s in sequences)
        if trained == 0:
            raise HttpError(400, "no sequence has a token with loss_mask 1")
        with self.lock:
            started = time.monotonic()
            self.model.train()
            self.optimizer.zero_grad()
            totals = {"loss": 0.0, "kl": 0.0, "clipped": 0.0, "logprob_diff": 0.0}
            # Data parallelism: each replica's shard contributes its part of the token mean,
            # so the summed gradients equal the whole batch's.
            shards = [sequences[i::len(self.replicas)] for i in range(len(self.replicas))]
            for shard in shards:
                if shard:
                    for key, value in self._backward(shard, trained).items():
                        totals[key] += value
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                             self.max_grad_norm))
            self.optimizer.step()
            self.model.eval()
            self.version += 1
            seconds = time.monotonic() - started
            self.steps += 1
            self.tokens += trained
            self.sequences += len(sequences)
            self.train_seconds += seconds
            self.last_step = {
                "step": step, "version": self.version, "loss": totals["loss"],
                "kl": totals["kl"], "clip_fraction": totals["clipped"],
                "logprob_diff": totals["logprob_diff"], "grad_norm": grad_norm,
                "tokens": trained, "sequences": len(sequences), "seconds": seconds,
            }
            return dict(self.last_step)

    def _backward(self, shard: List[Sequence], trained: int) -> Dict[str, float]:
        """Accumulates the gradient of the shard's share of the loss; returns its shares of the
        loss, the KL and the fraction of clipped tokens."""
        length = max(len(s.prompt_ids) + len(s.completion_ids) for s in shard)
        ids = torch.zeros((len(shard), length), dtype=torch.long)
        old = torch.zeros((len(shard), length - 1))
        mask = torch.zeros((len(shard), length - 1))
        advantages = torch.tensor([[s.advantage] for s in shard])
        for row, s in enumerate(shard):
            tokens = s.prompt_ids + s.completion_ids
            ids[row, :len(tokens)] = torch.tensor(tokens)
            # Completion token j sits at position P + j and is predicted at position P + j - 1.
            first = len(s.prompt_ids) - 1
            old[row, first:first + len(s.completion_ids)] = torch.tensor(s.logprobs)
            mask[row, first:first + len(s.completion_ids)] = torch.tensor(s.loss_mask,
                                                                          dtype=torch.float)
        inputs, targets = ids[:, :-1], ids[:, 1:, None]
        logp = torch.log_softmax(self.model(inputs), -1).gather(-1, targets).squeeze(-1)
        with torch.no_grad():
            ref = torch.log_softmax(self.reference(inputs), -1).gather(-1, targets).squeeze(-1)
        log_ratio = logp - old
        ratio = torch.exp(torch.clamp(log_ratio, -20.0, 20.0))
        clipped = torch.clamp(ratio, 1.0 - self.clip, 1.0 + self.clip)
        policy = torch.maximum(-advantages * ratio, -advantages * clipped)
        ref_log_ratio = ref - logp
        kl = torch.exp(ref_log_ratio) - 1.0 - ref_log_ratio
        loss = ((policy + self.kl_coef * kl) * mask).sum() / trained
        loss.backward()
        was_clipped = ((ratio - clipped).abs() > 1e-6).float()
        # How far the trainer's log-probabilities (before the update) are from the engine's.
        diff = (log_ratio.detach().abs() * mask).sum()
        return {"loss": float(loss), "kl": float((kl.detach() * mask).sum()) / trained,
                "clipped": float((was_clipped * mask).sum()) / trained,
                "logprob_diff": float(diff) / trained}

    def save_weights(self, request: Request) -> Dict[str, Any]:
        path = field(request.body, "path", "str")
        if not path:
            raise HttpError(400, "path is empty")
        with self.lock:
            self._check_version(request)
            started = time.monotonic()
            try:
                tiny_lm.save_weights(self.model, path)
            except OSError as error:
                raise HttpError(500, f"cannot write {path}: {error}") from error
            return {"path": path, "version": self.version,
                    "seconds": time.monotonic() - started}

    def init_weight_update_group(self, request: Request) -> Dict[str, Any]:
        address = field(request.body, "master_address", "str")
        port = field(request.body, "master_port", "int")
        world_size = field(request.body, "world_size", "int")
        group_name = field(request.body, "group_name", "str", "weight_update_group")
        backend = field(request.body, "backend", "str", "gloo")
        timeout_s = field(request.body, "timeout_s", "number", 120)
        if world_size < 2:
            raise HttpError(400, f"world_size {world_size}: the group needs the trainer (rank 0) "
                                 "and at least one engine")
        if backend != "gloo":
            raise HttpError(400, f"backend {backend!r}: the CPU trainer speaks gloo only")
        with self.lock:
            started = time.monotonic()
            if dist.is_initialized():
                dist.destroy_process_group()
                self.group = None
            try:
                dist.init_process_group(
                    "gloo", init_method=f"tcp://{address}:{port}", rank=0,
                    world_size=world_size, timeout=datetime.timedelta(seconds=timeout_s))
            except (RuntimeError, ValueError) as error:
                raise HttpError(500, f"init_process_group failed: {error}") from error
            self.group = group_name
            return {"success": True, "group_name": group_name, "rank": 0,
                    "world_size": world_size, "tensors": tiny_lm.tensor_specs(self.model),
                    "seconds": time.monotonic() - started}

    def broadcast_weights(self, request: Request) -> Dict[str, Any]:
        group_name = field(request.body, "group_name", "str", "weight_update_group")
        with self.lock:
            if self.group != group_name:
                raise HttpError(400, f"not in weight update group {group_name!r} "
                                     f"(current: {self.group!r}); call /init_weight_update_group")
            self._check_version(request)
            started = time.monotonic()
            count, size = 0, 0
            try:
                for tensor in self.model.state_dict().values():
                    dist.broadcast(tensor.detach().contiguous(), src=0)
                    count += 1
                    size += tensor.numel() * tensor.element_size()
            except RuntimeError as error:
                raise HttpError(500, f"broadcast failed after {count} tensors: {error}") from error
            return {"version": self.version, "tensors": count, "bytes": size,
                    "seconds": time.monotonic() - started}

    def join(self, request: Request) -> Dict[str, Any]:
        replica = field(request.body, "replica", "str")
        with self.lock:
            if not replica or replica in self.replicas:
                raise HttpError(400, f"replica {replica!r} is empty or already a member")
            self.replicas.append(replica)
            return self._membership()

    def leave(self, request: Request) -> Dict[str, Any]:
        replica = field(request.body, "replica", "str")
        with self.lock:
            if replica not in self.replicas:
                raise HttpError(400, f"replica {replica!r} is not a member "
                                     f"(members: {', '.join(self.replicas)})")
            if len(self.replicas) == 1:
                raise HttpError(400, f"replica {replica!r} is the last one; the trainer "
                                     "cannot train without a replica")
            self.replicas.remove(replica)
            return self._membership()

    def health(self, request: Request) -> Dict[str, Any]:
        del request
        return {"status": "ok", "version": self.version}

    def metrics(self, request: Request) -> Dict[str, Any]:
        del request
        with self.lock:
            return {"version": self.version, "steps": self.steps, "tokens": self.tokens,
                    "sequences": self.sequences, "train_seconds": self.train_seconds,
                    "last_step": self.last_step, "replicas": list(self.replicas),
                    "dp_size": len(self.replicas), "group_name": self.group}

    # ---- Helpers --------------------------------------------------------------------------------

    def _membership(self) -> Dict[str, Any]:
        return {"replicas": list(self.replicas), "dp_size": len(self.replicas)}

    def _check_version(self, request: Request) -> None:
        wanted = field(request.body, "version", "int", None)
        if wanted is not None and wanted != self.version:
            raise HttpError(409, f"the trainer holds version {self.version}, not {wanted}")

    def routes(self) -> Dict[Any, http_util.Route]:
        return {
            ("POST", "/train_step"): self.train_step,
            ("POST", "/save_weights"): self.save_weights,
            ("POST", "/init_weight_update_group"): self.init_weight_update_group,
            ("POST", "/broadcast_weights"): self.broadcast_weights,
            ("POST", "/join"): self.join,
            ("POST", "/leave"): self.leave,
            ("GET", "/health"): self.health,
            ("GET", "/metrics"): self.metrics,
        }


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="libra's CPU trainer (GRPO on the tiny model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=0, help="initialises the model")
    parser.add_argument("--weights", help="initial weights (a file written by save_weights)")
    parser.add_argument("--version", type=int, default=0, help="version of the initial weights")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--kl-coef", type=float, default=0.0, help="KL-to-reference weight")
    parser.add_argument("--clip", type=float, default=0.2, help="PPO ratio clip epsilon")
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--max-model-len", type=int, default=tiny_lm.DEFAULT_MAX_LEN)
    parser.add_argument("--replica", default="replica-0", help="name of the first DP replica")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser.parse_args(argv)


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    trainer = Trainer(args)
    server = http_util.JsonServer(args.host, args.port, trainer.routes(), _error_body,
                                  args.verbose)
    print(f"trainer listening on http://{args.host}:{server.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
