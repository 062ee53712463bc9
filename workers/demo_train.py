"""GRPO on the toy task, end to end on CPU: rollout_server + trainer, driven over HTTP.

This is what libra's cluster backend does, in a page of Python: launch an engine and a trainer,
roll out multi-turn tool-using episodes (token ids end to end: each turn continues from the exact
ids generated so far, tool results appended as ids), score them, normalise rewards per GRPO group,
train one step, and push the new weights to the engine (through disk or a gloo broadcast). It
prints the mean reward of every step; the reward rises from about 0.3 (the warm start) towards 1.

Usage: demo_train.py [--dialect vllm|sglang] [--sync disk|distributed] [--steps 40]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import torch

import http_util
import tiny_lm
import toy_task

HERE = os.path.dirname(os.path.abspath(__file__))


class Worker:
    """A worker process (rollout_server.py or trainer.py) on a free port, stopped on close."""

    def __init__(self, script: str, args: List[str], log_path: str) -> None:
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-B", os.path.join(HERE, script), "--port", "0"] + args,
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=HERE)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if "listening on " not in line:
            self.close()
            raise RuntimeError(f"{script} did not start; see {log_path}")
        self.url = line.strip().rsplit(" ", 1)[-1]
        http_util.wait_healthy(self.url + "/health", timeout=60)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.log.close()


class EngineClient:
    """Generate and weight-update calls in one engine dialect."""

    def __init__(self, url: str, dialect: str) -> None:
        self.url = url
        self.dialect = dialect

    def generate(self, ids: List[int], seed: int, temperature: float) -> Tuple[List[int],
                                                                              List[float]]:
        if self.dialect == "vllm":
            reply = http_util.post(self.url + "/v1/completions", {
                "prompt": ids, "max_tokens": toy_task.MAX_TOKENS_PER_TURN,
                "temperature": temperature, "stop_token_ids": toy_task.STOP_TOKEN_IDS,
                "logprobs": 0, "return_token_ids": True, "seed": seed})
            choice = reply["choices"][0]
            return choice["token_ids"], choice["logprobs"]["token_logprobs"]
        reply = http_util.post(self.url + "/generate", {
            "input_ids": ids, "return_logprob": True,
            "sampling_params": {"max_new_tokens": toy_task.MAX_TOKENS_PER_TURN,
                                "temperature": temperature,
                                "stop_token_ids": toy_task.STOP_TOKEN_IDS,
                                "sampling_seed": seed}})
        pairs = reply["meta_info"]["output_token_logprobs"]
        return [int(p[1]) for p in pairs], [float(p[0]) for p in pairs]

    def reload_from_disk(self, path: str, version: int) -> None:
        if self.dialect == "vllm":
            http_util.post(self.url + "/collective_rpc", {"method": "reload_weights"})
        else:
            http_util.post(self.url + "/update_weights_from_disk",
                           {"model_path": path, "weight_version": str(version)})

    def init_group(self, port: int, rank_offset: int, world_size: int) -> None:
        info = {"master_address": "127.0.0.1", "master_port": port, "rank_offset": rank_offset,
                "world_size": world_size, "backend": "gloo"}
        if self.dialect == "vllm":
            http_util.post(self.url + "/init_weight_transfer_engine", {"init_info": info})
        else:
            http_util.post(self.url + "/init_weights_update_group",
                           dict(info, group_name="weight_update_group"))

    def receive(self, tensors: List[Dict[str, Any]], version: int) -> None:
        names = [t["name"] for t in tensors]
        dtypes = [t["dtype"] for t in tensors]
        shapes = [t["shape"] for t in tensors]
        if self.dialect == "vllm":
            http_util.post(self.url + "/update_weights", {
                "update_info": {"names": names, "dtype_names": dtypes, "shapes": shapes}})
        else:
            http_util.post(self.url + "/update_weights_from_distributed", {
                "names": names, "dtypes": dtypes, "shapes": shapes,
                "group_name": "weight_update_group", "weight_version": str(version)})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def both(first: Any, second: Any) -> Tuple[Any, Any]:
    """Runs two blocking calls at once (each side of a collective waits for the other)."""
    results: Dict[int, Any] = {}
    errors: List[BaseException] = []

    def run(index: int, call: Any) -> None:
        try:
            results[index] = call()
        except BaseException as error:  # Re-raised below, on the caller's thread.
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results[0], results[1]


def seed_for(*parts: int) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def run_episode(engine: EngineClient, prompt: toy_task.Prompt, step: int, sample: int,
                temperature: float) -> toy_task.Episode:
    episode = toy_task.Episode(prompt)
    while not episode.done:
        tokens, logprobs = engine.generate(
            episode.context(), seed_for(step, prompt.index, sample, episode.turns), temperature)
        if episode.add_model_turn(tokens, logprobs) == "call":
            episode.run_tool_turn(tokens)
    return episode


def group_advantages(rewards: List[float]) -> List[float]:
    """GRPO: (r - mean) / (sample std + 1e-6) within a group; all zero when the std is ~0."""
    if len(rewards) < 2:
        return [0.0] * len(rewards)
    mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
    if std <= 1e-6:
        return [0.0] * len(rewards)
    return [(r - mean) / (std + 1e-6) for r in rewards]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialect", choices=["vllm", "sglang"], default="sglang")
    parser.add_argument("--sync", choices=["disk", "distributed"], default="distributed")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--samples", type=int, default=4, help="samples per prompt (group size)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--kl-coef", type=float, default=0.0)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--warm-start-steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8, help="episodes in flight")
    parser.add_argument("--workdir", help="keep weights and logs here (default: a temp dir)")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    workdir = args.workdir or tempfile.mkdtemp(prefix="libra-demo-")
    os.makedirs(workdir, exist_ok=True)
    initial = os.path.join(workdir, "initial.pt")
    served = os.path.join(workdir, "served.pt")
    started = time.monotonic()
    model = tiny_lm.build_model(args.seed)
    toy_task.warm_start(model, args.seed, steps=args.warm_start_steps)
    tiny_lm.save_weights(model, initial)
    tiny_lm.save_weights(model, served)
    print(f"warm start: {args.warm_start_steps} supervised steps in "
          f"{time.monotonic() - started:.1f} s; workdir {workdir}", flush=True)

    server: Optional[Worker] = None
    trainer: Optional[Worker] = None
    try:
        server = Worker("rollout_server.py", ["--dialect", args.dialect, "--model", served,
                                              "--seed", str(args.seed)],
                        os.path.join(workdir, "rollout_server.log"))
        trainer = Worker("trainer.py", ["--weights", initial, "--lr", str(args.lr),
                                        "--kl-coef", str(args.kl_coef)],
                         os.path.join(workdir, "trainer.log"))
        engine = EngineClient(server.url, args.dialect)
        tensors: List[Dict[str, Any]] = []
        if args.sync == "distributed":
            port = free_port()
            reply, _ = both(
                lambda: http_util.post(trainer.url + "/init_weight_update_group", {
                    "master_address": "127.0.0.1", "master_port": port, "world_size": 2,
                    "backend": "gloo"}),
                lambda: engine.init_group(port, 1, 2))
            tensors = reply["tensors"]

        print("step  reward  tool_ok  loss     kl       grad_norm  rollout_s  train_s  sync_s",
              flush=True)
        history: List[float] = []
        pool = concurrent.futures.ThreadPoolExecutor(args.concurrency)
        for step in range(args.steps):
            t0 = time.monotonic()
            prompts = [toy_task.make_prompt(args.seed, step * args.prompts + i)
                       for i in range(args.prompts)]
            futures = [[pool.submit(run_episode, engine, p, step, s, args.temperature)
                        for s in range(args.samples)] for p in prompts]
            groups = [[f.result() for f in group] for group in futures]
            t1 = time.monotonic()
            sequences = []
            for group in groups:
                advantages = group_advantages([e.reward for e in group])
                for episode, advantage in zip(group, advantages):
                    sequences.append({
                        "prompt_ids": episode.prompt_ids,
                        "completion_ids": episode.completion_ids,
                        "logprobs": episode.logprobs, "loss_mask": episode.loss_mask,
                        "advantage": advantage})
            metrics = http_util.post(trainer.url + "/train_step",
                                     {"step": step, "sequences": sequences})
            t2 = time.monotonic()
            version = metrics["version"]
            if args.sync == "disk":
                path = served if args.dialect == "vllm" else os.path.join(
                    workdir, f"v{version}.pt")
                http_util.post(trainer.url + "/save_weights", {"path": path})
                engine.reload_from_disk(path, version)
            else:
                both(lambda: http_util.post(trainer.url + "/broadcast_weights",
                                            {"version": version}),
                     lambda: engine.receive(tensors, version))
            t3 = time.monotonic()
            episodes = [e for group in groups for e in group]
            reward = statistics.fmean(e.reward for e in episodes)
            tool_ok = statistics.fmean(
                1.0 if e.tool_calls == len(e.prompt.keys) else 0.0 for e in episodes)
            history.append(reward)
            print(f"{step:4d}  {reward:6.3f}  {tool_ok:7.3f}  {metrics['loss']:+.4f}  "
                  f"{metrics['kl']:.5f}  {metrics['grad_norm']:9.4f}  {t1 - t0:9.2f}  "
                  f"{t2 - t1:7.2f}  {t3 - t2:6.2f}", flush=True)
        pool.shutdown()
        window = max(1, min(5, len(history) // 2))
        print(f"mean reward of the first {window} steps {statistics.fmean(history[:window]):.3f}, "
              f"of the last {window} {statistics.fmean(history[-window:]):.3f}; "
              f"{time.monotonic() - started:.0f} s in all", flush=True)
    finally:
        for worker in (server, trainer):
            if worker is not None:
                worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
