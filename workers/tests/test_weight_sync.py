"""Weight sync over torch.distributed (gloo) between worker processes: the trainer is rank 0, a
vLLM-dialect engine rank 1 and an SGLang-dialect engine rank 2; afterwards both engines generate
exactly what the trainer's weights generate. Also a smoke run of demo_train.py."""

import os
import subprocess
import sys
import tempfile
import threading
import unittest

import torch

import demo_train
import helpers
import http_util
import tiny_lm
import toy_task as T

PROMPT = [T.BOS, T.KEYS, T.digit(7), T.GO]


def greedy(model, prompt, count):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            ids.append(int(torch.argmax(model(torch.tensor([ids]))[0, -1])))
    return ids[len(prompt):]


def concurrently(*calls):
    results, errors = [None] * len(calls), []

    def run(index, call):
        try:
            results[index] = call()
        except Exception as error:  # Re-raised on the test's thread.
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]
    return results


class WeightSyncTest(unittest.TestCase):
    def test_broadcast_reaches_both_dialects(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            workers = []
            try:
                trainer = demo_train.Worker("trainer.py", ["--seed", "5"],
                                            os.path.join(tmp, "trainer.log"))
                workers.append(trainer)
                vllm = demo_train.Worker("rollout_server.py", ["--dialect", "vllm"],
                                         os.path.join(tmp, "vllm.log"))
                workers.append(vllm)
                sglang = demo_train.Worker("rollout_server.py", ["--dialect", "sglang"],
                                           os.path.join(tmp, "sglang.log"))
                workers.append(sglang)
                port = demo_train.free_port()
                group = {"master_address": "127.0.0.1", "master_port": port, "world_size": 3,
                         "backend": "gloo"}
                reply, _, _ = concurrently(
                    lambda: http_util.post(trainer.url + "/init_weight_update_group", group),
                    lambda: http_util.post(vllm.url + "/init_weight_transfer_engine",
                                           {"init_info": dict(group, rank_offset=1)}),
                    lambda: http_util.post(sglang.url + "/init_weights_update_group",
                                           dict(group, rank_offset=2)))
                tensors = reply["tensors"]
                names = [t["name"] for t in tensors]
                dtypes = [t["dtype"] for t in tensors]
                shapes = [t["shape"] for t in tensors]
                concurrently(
                    lambda: http_util.post(trainer.url + "/broadcast_weights", {"version": 0}),
                    lambda: http_util.post(vllm.url + "/update_weights", {"update_info": {
                        "names": names, "dtype_names": dtypes, "shapes": shapes}}),
                    lambda: http_util.post(sglang.url + "/update_weights_from_distributed", {
                        "names": names, "dtypes": dtypes, "shapes": shapes,
                        "group_name": "weight_update_group", "weight_version": "v0"}))

                path = os.path.join(tmp, "trainer.pt")
                http_util.post(trainer.url + "/save_weights", {"path": path})
                model = tiny_lm.build_model(0)
                tiny_lm.load_weights(model, path)
                expected = greedy(model, PROMPT, 6)
                self.assertNotEqual(expected, greedy(tiny_lm.build_model(0), PROMPT, 6))
                got_vllm = http_util.post(vllm.url + "/v1/completions", {
                    "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                    "return_token_ids": True})["choices"][0]["token_ids"]
                got_sglang = http_util.post(sglang.url + "/generate", {
                    "input_ids": PROMPT, "sampling_params": {
                        "max_new_tokens": 6, "temperature": 0, "ignore_eos": True}})
                self.assertEqual(got_vllm, expected)
                self.assertEqual(got_sglang["output_ids"], expected)
                self.assertEqual(got_sglang["meta_info"]["weight_version"], "v0")
            finally:
                for worker in workers:
                    worker.close()

    def test_demo_runs(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(
                [sys.executable, "-B", "demo_train.py", "--dialect", "vllm", "--sync", "disk",
                 "--steps", "2", "--prompts", "2", "--samples", "2", "--warm-start-steps", "2",
                 "--workdir", tmp], cwd=helpers.WORKERS, capture_output=True, text=True,
                timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("mean reward of the first", out.stdout)


if __name__ == "__main__":
    unittest.main()
