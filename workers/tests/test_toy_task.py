"""The toy task: prompts, the lookup tool, the reward and the episode bookkeeping."""

import json
import random
import subprocess
import sys
import unittest

import helpers
import toy_task as T


class ToyTaskTest(unittest.TestCase):
    def test_prompts_are_deterministic_and_variable(self) -> None:
        self.assertEqual(T.make_prompt(3, 7), T.make_prompt(3, 7))
        lengths = {len(T.make_prompt(3, i).keys) for i in range(50)}
        self.assertEqual(lengths, {1, 2})
        prompt = T.make_prompt(3, 7)
        self.assertEqual(prompt.tokens()[:2], [T.BOS, T.KEYS])
        self.assertEqual(prompt.tokens()[-1], T.GO)

    def test_tool_looks_up_the_hidden_table(self) -> None:
        prompt = T.make_prompt(0, 1)
        key = prompt.keys[0]
        tokens, status = T.run_tool(prompt, [T.CALL, T.digit(key), T.END_CALL])
        self.assertEqual(status, "success")
        self.assertEqual(tokens, [T.RESULT, T.digit(prompt.table[key]), T.END_RESULT])
        for malformed in ([T.CALL, T.END_CALL], [T.CALL, T.EOS, T.END_CALL],
                          [T.digit(1), T.CALL, T.digit(2), T.END_CALL]):
            self.assertEqual(T.run_tool(prompt, malformed),
                             ([T.RESULT, T.ERROR, T.END_RESULT], "error"))

    def test_reward_counts_correct_values(self) -> None:
        prompt = T.Prompt(0, (3, 5), tuple(range(16)))
        self.assertEqual(T.reward(prompt, [T.ANSWER, T.digit(3), T.digit(5), T.EOS]), 1.0)
        self.assertEqual(T.reward(prompt, [T.ANSWER, T.digit(3), T.digit(6), T.EOS]), 0.5)
        self.assertEqual(T.reward(prompt, [T.ANSWER, T.digit(3)]), 0.0)  # too few values
        self.assertEqual(T.reward(prompt, [T.digit(3), T.digit(5), T.EOS]), 0.0)  # no ANSWER
        self.assertEqual(T.reward(prompt, [T.ANSWER, T.digit(3), T.GO, T.EOS]), 0.0)

    def test_perfect_demonstration_scores_one(self) -> None:
        prompt = T.make_prompt(0, 4)
        ids, mask = T.demonstration(prompt, random.Random(0), noise=0.0)
        self.assertEqual(len(ids), len(mask))
        episode = T.Episode(prompt)
        rest = ids[len(prompt.tokens()):]
        while not episode.done:
            cut = next(i for i, t in enumerate(rest) if t in T.STOP_TOKEN_IDS) + 1
            turn, rest = rest[:cut], rest[cut:]
            if episode.add_model_turn(turn, [0.0] * len(turn)) == "call":
                episode.run_tool_turn(turn)
                rest = rest[3:]  # the demonstration's copy of the tool result
        self.assertEqual(episode.reward, 1.0)
        self.assertEqual(episode.tool_calls, len(prompt.keys))
        self.assertEqual(episode.prompt_ids + episode.completion_ids, ids)
        self.assertEqual([0] * len(prompt.tokens()) + episode.loss_mask, mask)

    def test_episode_ends_after_too_many_calls(self) -> None:
        prompt = T.Prompt(0, (1,), tuple(range(16)))
        episode = T.Episode(prompt)
        call = [T.CALL, T.digit(1), T.END_CALL]
        for _ in range(prompt.max_turns() - 1):
            self.assertEqual(episode.add_model_turn(call, [-0.1] * 3), "call")
            episode.run_tool_turn(call)
        self.assertIsNone(episode.add_model_turn(call, [-0.1] * 3))
        self.assertTrue(episode.done)
        self.assertEqual(episode.reward, 0.0)

    def test_command_line_tool(self) -> None:
        prompt = T.make_prompt(2, 9)
        request = {"seed": 2, "prompt": 9, "call": [T.CALL, T.digit(prompt.keys[0]), T.END_CALL]}
        out = subprocess.run([sys.executable, "-B", "toy_task.py", "tool"], cwd=helpers.WORKERS,
                             input=json.dumps(request), capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(json.loads(out), {
            "tokens": [T.RESULT, T.digit(prompt.table[prompt.keys[0]]), T.END_RESULT],
            "status": "success"})


if __name__ == "__main__":
    unittest.main()
