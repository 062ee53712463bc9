"""The trainer protocol: train steps, validation, saving weights, DP membership, metrics."""

import os
import tempfile
import unittest

import torch

import helpers
import tiny_lm
import toy_task as T


def sequence(advantage: float, **override):
    body = {"prompt_ids": [T.BOS, T.KEYS, T.digit(1), T.GO],
            "completion_ids": [T.CALL, T.digit(1), T.END_CALL, T.RESULT, T.digit(4),
                               T.END_RESULT, T.ANSWER, T.digit(4), T.EOS],
            "logprobs": [-1.0, -2.0, -0.5, 0.0, 0.0, 0.0, -1.5, -2.5, -0.3],
            "loss_mask": [1, 1, 1, 0, 0, 0, 1, 1, 1],
            "advantage": advantage}
    body.update(override)
    return body


class TrainerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = helpers.start_trainer("--lr", "1e-2", "--kl-coef", "0.1")
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self) -> None:
        self.server.stop()
        self.tmp.cleanup()

    def _weights(self, name: str):
        path = os.path.join(self.tmp.name, name)
        helpers.ok(self.server, "POST", "/save_weights", {"path": path})
        model = tiny_lm.build_model(0)
        tiny_lm.load_weights(model, path)
        return model

    def test_train_step_updates_weights_and_reports_metrics(self) -> None:
        before = self._weights("before.pt")
        reply = helpers.ok(self.server, "POST", "/train_step", {
            "step": 0, "sequences": [sequence(1.0), sequence(-1.0, completion_ids=[
                T.ANSWER, T.digit(2), T.EOS], logprobs=[-1.0, -3.0, -0.2], loss_mask=[1, 1, 1])]})
        self.assertEqual((reply["step"], reply["version"], reply["tokens"], reply["sequences"]),
                         (0, 1, 9, 2))
        for key in ("loss", "kl", "grad_norm", "seconds"):
            self.assertIsInstance(reply[key], float)
        self.assertGreater(reply["grad_norm"], 0)
        after = self._weights("after.pt")
        changed = [name for name, tensor in after.state_dict().items()
                   if not torch.equal(tensor, before.state_dict()[name])]
        self.assertTrue(changed)
        self.assertEqual(helpers.ok(self.server, "GET", "/health")["version"], 1)

    def test_positive_advantage_raises_the_sequence_probability(self) -> None:
        def logprob(model) -> float:
            seq = sequence(0)
            ids = torch.tensor([seq["prompt_ids"] + seq["completion_ids"]])
            with torch.no_grad():
                logp = torch.log_softmax(model(ids[:, :-1]), -1).gather(-1, ids[:, 1:, None])
            return float(logp[0, -3:].sum())

        before = logprob(self._weights("a.pt"))
        for step in range(3):
            helpers.ok(self.server, "POST", "/train_step",
                       {"step": step, "sequences": [sequence(1.0)]})
        self.assertGreater(logprob(self._weights("b.pt")), before)

    def test_malformed_batches_are_rejected(self) -> None:
        cases = [
            ({"sequences": [sequence(1.0)]}, "missing field 'step'"),
            ({"step": 0, "sequences": []}, "sequences is empty"),
            ({"step": 0, "sequences": [sequence(1.0, logprobs=[-1.0])]}, "one entry per token"),
            ({"step": 0, "sequences": [sequence(1.0, loss_mask=[0] * 9)]}, "no sequence"),
            ({"step": 0, "sequences": [sequence(1.0, prompt_ids=[70])]}, "token id outside"),
            ({"step": 0, "sequences": [sequence("high")]}, "sequences[0]: field 'advantage'"),
            ({"step": 0, "sequences": [sequence(1.0, logprobs=[0.5] * 9)]}, "positive"),
        ]
        for body, words in cases:
            with self.subTest(words=words):
                status, reply = helpers.call(self.server, "POST", "/train_step", body)
                self.assertEqual(status, 400)
                self.assertIn(words, reply["error"])
        self.assertEqual(helpers.ok(self.server, "GET", "/metrics")["steps"], 0)

    def test_join_and_leave_change_data_parallelism(self) -> None:
        self.assertEqual(helpers.ok(self.server, "POST", "/join", {"replica": "node1"}),
                         {"replicas": ["replica-0", "node1"], "dp_size": 2})
        status, reply = helpers.call(self.server, "POST", "/join", {"replica": "node1"})
        self.assertEqual(status, 400)
        helpers.ok(self.server, "POST", "/train_step", {"step": 0, "sequences": [
            sequence(1.0), sequence(-1.0), sequence(0.5)]})
        self.assertEqual(helpers.ok(self.server, "POST", "/leave", {"replica": "replica-0"}),
                         {"replicas": ["node1"], "dp_size": 1})
        status, reply = helpers.call(self.server, "POST", "/leave", {"replica": "node1"})
        self.assertEqual(status, 400)
        self.assertIn("last one", reply["error"])
        metrics = helpers.ok(self.server, "GET", "/metrics")
        self.assertEqual((metrics["steps"], metrics["dp_size"], metrics["version"]), (1, 1, 1))

    def test_version_mismatch_is_refused(self) -> None:
        status, reply = helpers.call(self.server, "POST", "/save_weights",
                                     {"path": os.path.join(self.tmp.name, "x.pt"), "version": 3})
        self.assertEqual(status, 409)
        self.assertIn("holds version 0", reply["error"])
        status, reply = helpers.call(self.server, "POST", "/broadcast_weights", {})
        self.assertEqual(status, 400)
        self.assertIn("init_weight_update_group", reply["error"])


if __name__ == "__main__":
    unittest.main()
