"""The rollout server in both dialects: generation, errors, abort, sleep / release, reloads."""

import os
import tempfile
import threading
import time
import unittest

import helpers
import tiny_lm
import toy_task as T

PROMPT = [T.BOS, T.KEYS, T.digit(3), T.GO]


def sglang_generate(server, prompt, **params):
    body = {"input_ids": prompt, "return_logprob": True,
            "sampling_params": dict({"max_new_tokens": 8}, **params)}
    return helpers.ok(server, "POST", "/generate", body)


class RolloutServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        cls.served = os.path.join(cls.tmp.name, "served.pt")
        tiny_lm.save_weights(tiny_lm.build_model(0), cls.served)
        cls.server = helpers.start_engine("--dialect", "both", "--model", cls.served)
        cls.slow = helpers.start_engine("--dialect", "both", "--token-delay-ms", "20")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.slow.stop()
        cls.tmp.cleanup()

    def test_vllm_completion_returns_token_ids_and_logprobs(self) -> None:
        reply = helpers.vllm_generate(self.server, PROMPT, max_tokens=6, ignore_eos=True)
        choice = reply["choices"][0]
        self.assertEqual(choice["prompt_token_ids"], PROMPT)
        self.assertEqual(len(choice["token_ids"]), 6)
        self.assertEqual(len(choice["logprobs"]["token_logprobs"]), 6)
        self.assertTrue(all(lp <= 0 for lp in choice["logprobs"]["token_logprobs"]))
        self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(reply["usage"], {"prompt_tokens": 4, "completion_tokens": 6,
                                          "total_tokens": 10})

    def test_same_seed_same_tokens(self) -> None:
        first = helpers.vllm_generate(self.server, PROMPT, seed=11)["choices"][0]["token_ids"]
        again = helpers.vllm_generate(self.server, PROMPT, seed=11)["choices"][0]["token_ids"]
        self.assertEqual(first, again)

    def test_stop_token_ends_generation_and_is_returned(self) -> None:
        greedy = helpers.vllm_generate(self.server, PROMPT, temperature=0, ignore_eos=True)
        first = greedy["choices"][0]["token_ids"][0]
        stopped = helpers.vllm_generate(self.server, PROMPT, temperature=0, ignore_eos=True,
                                        stop_token_ids=[first])["choices"][0]
        self.assertEqual(stopped["token_ids"], [first])
        self.assertEqual((stopped["finish_reason"], stopped["stop_reason"]), ("stop", first))
        meta = sglang_generate(self.server, PROMPT, temperature=0, ignore_eos=True,
                               stop_token_ids=[first])["meta_info"]
        self.assertEqual(meta["finish_reason"], {"type": "stop", "matched": first})

    def test_sglang_generate_shapes(self) -> None:
        reply = sglang_generate(self.server, PROMPT, max_new_tokens=5, ignore_eos=True)
        meta = reply["meta_info"]
        self.assertEqual(len(reply["output_ids"]), 5)
        self.assertEqual([p[1] for p in meta["output_token_logprobs"]], reply["output_ids"])
        self.assertEqual(meta["finish_reason"], {"type": "length", "length": 5})
        self.assertEqual((meta["prompt_tokens"], meta["completion_tokens"]), (4, 5))

    def test_bad_requests_are_rejected_with_a_reason(self) -> None:
        cases = [
            ("/v1/completions", {"prompt": [1] * 250, "max_tokens": 10}, 400, "context length"),
            ("/v1/completions", {"prompt": [1, 99], "max_tokens": 1}, 400, "vocabulary"),
            ("/v1/completions", {"prompt": "text", "max_tokens": 1}, 400, "token ids"),
            ("/v1/completions", {"prompt": [1], "model": "other"}, 404, "does not exist"),
            ("/generate", {"input_ids": []}, 400, "empty"),
            ("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": "x"}}, 400,
             "max_new_tokens"),
        ]
        for path, body, status, words in cases:
            with self.subTest(path=path, body=body):
                got, reply = helpers.call(self.server, "POST", path, body)
                self.assertEqual(got, status)
                self.assertIn(words, reply["error"]["message"])

    def _abort_while_running(self, start, abort) -> dict:
        """Starts a long generation, aborts it once it has produced a few tokens, and returns
        its reply."""
        replies = {}
        thread = threading.Thread(target=lambda: replies.setdefault("reply", start()))
        thread.start()
        deadline = time.monotonic() + 10
        while helpers.ok(self.slow, "GET", "/get_load")[0]["num_running_reqs"] == 0:
            self.assertLess(time.monotonic(), deadline, "the request never started")
            time.sleep(0.01)
        time.sleep(0.1)
        abort()
        thread.join(10)
        return replies["reply"]

    def test_sglang_abort_returns_partial_output(self) -> None:
        reply = self._abort_while_running(
            lambda: sglang_generate(self.slow, PROMPT, max_new_tokens=200, ignore_eos=True),
            lambda: helpers.ok(self.slow, "POST", "/abort_request", {"abort_all": True}))
        meta = reply["meta_info"]
        self.assertEqual(meta["finish_reason"]["type"], "abort")
        self.assertLess(len(reply["output_ids"]), 200)
        self.assertEqual(len(meta["output_token_logprobs"]), len(reply["output_ids"]))

    def test_vllm_abort_by_request_id(self) -> None:
        reply = self._abort_while_running(
            lambda: helpers.vllm_generate(self.slow, PROMPT, max_tokens=200, ignore_eos=True,
                                          request_id="r1"),
            lambda: self.assertEqual(helpers.ok(self.slow, "POST", "/abort_requests",
                                                {"request_ids": ["r1"]})["aborted"], 1))
        choice = reply["choices"][0]
        self.assertEqual(choice["finish_reason"], "abort")
        self.assertLess(len(choice["token_ids"]), 200)

    def test_sleep_and_wake_up(self) -> None:
        helpers.ok(self.server, "POST", "/sleep?level=1")
        self.assertTrue(helpers.ok(self.server, "GET", "/is_sleeping")["is_sleeping"])
        status, reply = helpers.call(self.server, "POST", "/v1/completions", {"prompt": PROMPT})
        self.assertEqual(status, 503)
        helpers.ok(self.server, "POST", "/wake_up?tags=weights")
        self.assertTrue(helpers.ok(self.server, "GET", "/is_sleeping")["is_sleeping"])
        helpers.ok(self.server, "POST", "/wake_up?tags=kv_cache")
        self.assertFalse(helpers.ok(self.server, "GET", "/is_sleeping")["is_sleeping"])
        helpers.vllm_generate(self.server, PROMPT)

    def test_release_and_resume_memory(self) -> None:
        helpers.ok(self.server, "POST", "/release_memory_occupation", {})
        status, _ = helpers.call(self.server, "POST", "/generate", {"input_ids": PROMPT})
        self.assertEqual(status, 503)
        helpers.ok(self.server, "POST", "/resume_memory_occupation", {"tags": ["weights",
                                                                             "kv_cache"]})
        sglang_generate(self.server, PROMPT)

    def test_weight_reloads_change_the_outputs(self) -> None:
        before = helpers.vllm_generate(self.server, PROMPT, temperature=0,
                                       ignore_eos=True)["choices"][0]["token_ids"]
        other = os.path.join(self.tmp.name, "other.pt")
        tiny_lm.save_weights(tiny_lm.build_model(1), other)
        reply = helpers.ok(self.server, "POST", "/update_weights_from_disk",
                           {"model_path": other, "weight_version": "7"})
        self.assertTrue(reply["success"])
        after = sglang_generate(self.server, PROMPT, temperature=0, ignore_eos=True)
        self.assertNotEqual(after["output_ids"], before)
        self.assertEqual(after["meta_info"]["weight_version"], "7")
        # vLLM's reload rereads the served file: the original weights come back.
        helpers.ok(self.server, "POST", "/collective_rpc", {"method": "reload_weights"})
        again = helpers.vllm_generate(self.server, PROMPT, temperature=0, ignore_eos=True)
        self.assertEqual(again["choices"][0]["token_ids"], before)
        status, reply = helpers.call(self.server, "POST", "/update_weights_from_disk",
                                     {"model_path": os.path.join(self.tmp.name, "missing.pt")})
        self.assertEqual(status, 400)
        self.assertFalse(reply["success"])


if __name__ == "__main__":
    unittest.main()
