"""A toy agentic task whose tool outcomes matter: look up hidden values and report them.

Each prompt holds 1..max_keys keys (digits 0-15). Every prompt has its own hidden table of 16
values, which the model never sees: the only way to learn a key's value is to call the lookup
tool with that key. An episode is multi-turn and of variable length:

    prompt   BOS KEYS k1 .. kn GO
    turn i   CALL x END_CALL              (model; stops at END_CALL)
    tool     RESULT table[x] END_RESULT   (or RESULT ERROR END_RESULT for a malformed call)
    last     ANSWER v1 .. vn EOS          (model; stops at EOS)

The reward is the fraction of the n answer values equal to table[k1] .. table[kn], 0 for a
malformed answer. A policy scores well only if it calls the tool with the right key, once per key,
and copies the tool's result into its answer: guessing scores 1/16 per value.

A randomly initialised model almost never produces the format, so training starts (as RL
post-training does) from a supervised warm start on noisy demonstrations: half of the demonstrated
calls use a random key and half of the answers a random value. The warm-started policy scores about
0.3; GRPO then raises it towards 1 (demo_train.py).

Also a command-line tool, so that an orchestrator can run the tool and the reward as sandboxed
subprocesses (JSON on stdin, JSON on stdout):

    toy_task.py prompt --seed S --index P         -> {"tokens": [...], "keys": n}
    toy_task.py tool   < {"seed", "prompt", "call": [ids]}    -> {"tokens": [...], "status"}
    toy_task.py reward < {"seed", "prompt", "answer": [ids]}  -> {"reward": r}
    toy_task.py warm-start --out PATH [--seed S] [--steps N]  (writes initial weights)
    toy_task.py --port P serve    (the tool as an HTTP tool server: POST /tool with the same JSON)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from typing import List, Optional, Sequence, Tuple

# torch and tiny_lm are imported where they are used (the warm start): the prompt, tool and
# reward commands run as a subprocess per call and must start in milliseconds, not seconds.

# Token ids. The rest of the 64-token vocabulary is unused (a policy that emits it is wrong).
PAD, BOS, EOS, KEYS, GO, CALL, END_CALL, RESULT, END_RESULT, ANSWER, ERROR = range(11)
DIGIT0 = 16
NUM_VALUES = 16

# Every turn of the model stops at one of these (engines are asked to stop there).
STOP_TOKEN_IDS = [EOS, END_CALL]
MAX_TOKENS_PER_TURN = 8


_NAMES = ["<pad>", "<bos>", "<eos>", "<keys>", "<go>", "<call>", "</call>", "<result>",
          "</result>", "<answer>", "<error>"]


def token_name(token: int) -> str:
    """A readable name for a token ("<call>", "d7"); engines return it as the token's text."""
    if 0 <= token < len(_NAMES):
        return _NAMES[token]
    if is_digit(token):
        return f"d{token - DIGIT0}"
    return f"<t{token}>"


def digit(value: int) -> int:
    return DIGIT0 + value


def is_digit(token: int) -> bool:
    return DIGIT0 <= token < DIGIT0 + NUM_VALUES


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One task instance: its keys and its hidden table."""
    index: int
    keys: Tuple[int, ...]
    table: Tuple[int, ...]

    def tokens(self) -> List[int]:
        return [BOS, KEYS] + [digit(k) for k in self.keys] + [GO]

    def max_turns(self) -> int:
        """One call per key, one spare call, and the answer."""
        return len(self.keys) + 2


def make_prompt(seed: int, index: int, max_keys: int = 2) -> Prompt:
    """Prompt `index` of the task seeded by `seed`; the same arguments give the same prompt."""
    rng = random.Random(f"toy-task:{seed}:{index}")
    count = rng.randint(1, max_keys)
    keys = tuple(rng.sample(range(NUM_VALUES), count))
    table = tuple(rng.randrange(NUM_VALUES) for _ in range(NUM_VALUES))
    return Prompt(index, keys, table)


def run_tool(prompt: Prompt, call: Sequence[int]) -> Tuple[List[int], str]:
    """The lookup tool on a model turn that ended in END_CALL: (result tokens, status)."""
    if len(call) == 3 and call[0] == CALL and is_digit(call[1]) and call[2] == END_CALL:
        return [RESULT, digit(prompt.table[call[1] - DIGIT0]), END_RESULT], "success"
    return [RESULT, ERROR, END_RESULT], "error"


def reward(prompt: Prompt, answer: Sequence[int]) -> float:
    """The reward of a final model turn: the fraction of values right, 0 when malformed."""
    tokens = list(answer)
    if tokens and tokens[-1] == EOS:
        tokens.pop()
    if len(tokens) != len(prompt.keys) + 1 or tokens[0] != ANSWER:
        return 0.0
    values = tokens[1:]
    if not all(is_digit(token) for token in values):
        return 0.0
    right = sum(1 for key, token in zip(prompt.keys, values)
                if token - DIGIT0 == prompt.table[key])
    return right / len(prompt.keys)


class Episode:
    """The transcript of one trajectory: the prompt, then model and tool segments.

    Token ids are kept exactly as generated: the transcript is never re-tokenised, so the trainer
    sees the tokens (and their logprobs) that the engine produced.
    """

    def __init__(self, prompt: Prompt) -> None:
        self.prompt = prompt
        self.prompt_ids = prompt.tokens()
        # Everything after the prompt, with a logprob and a loss-mask bit per token.
        self.completion_ids: List[int] = []
        self.logprobs: List[float] = []
        self.loss_mask: List[int] = []
        self.turns = 0
        self.tool_calls = 0
        self.done = False
        self.reward = 0.0

    def context(self) -> List[int]:
        """The tokens the next turn continues from."""
        return self.prompt_ids + self.completion_ids

    def add_model_turn(self, tokens: Sequence[int], logprobs: Sequence[float]) -> Optional[str]:
        """Appends a model turn. Returns "call" when it called the tool (call run_tool_turn next)
        and None when the episode is over (the reward is then set)."""
        if len(tokens) != len(logprobs):
            raise ValueError(f"{len(tokens)} tokens but {len(logprobs)} logprobs")
        self.completion_ids += tokens
        self.logprobs += logprobs
        self.loss_mask += [1] * len(tokens)
        self.turns += 1
        if tokens and tokens[-1] == END_CALL and self.turns < self.prompt.max_turns():
            return "call"
        self.done = True
        self.reward = 0.0 if tokens and tokens[-1] == END_CALL else reward(self.prompt, tokens)
        return None

    def run_tool_turn(self, call: Sequence[int]) -> str:
        """Runs the tool on the last model turn and appends its result (not trained on)."""
        result, status = run_tool(self.prompt, call)
        self.completion_ids += result
        self.logprobs += [0.0] * len(result)
        self.loss_mask += [0] * len(result)
        self.tool_calls += 1
        return status


def demonstration(prompt: Prompt, rng: random.Random, noise: float) -> Tuple[List[int], List[int]]:
    """A noisy demonstration: (token ids, loss mask over them). With probability `noise` a call
    uses a random key, and independently an answer value is a random digit."""
    ids = prompt.tokens()
    mask = [0] * len(ids)
    results = []
    for key in prompt.keys:
        argument = rng.randrange(NUM_VALUES) if rng.random() < noise else key
        call = [CALL, digit(argument), END_CALL]
        result, _ = run_tool(prompt, call)
        ids += call + result
        mask += [1] * len(call) + [0] * len(result)
        results.append(result[1] - DIGIT0)
    answer = [ANSWER] + [digit(rng.randrange(NUM_VALUES) if rng.random() < noise else value)
                         for value in results] + [EOS]
    return ids + answer, mask + [1] * len(answer)


def warm_start(model: "tiny_lm.TinyLM", seed: int, steps: int = 400, batch: int = 64,
               noise: float = 0.5, max_keys: int = 2, lr: float = 3e-3) -> float:
    """Supervised warm start on noisy demonstrations (cross-entropy on the model's tokens).
    Returns the last batch's loss. Deterministic for a seed."""
    rng = random.Random(f"warm-start:{seed}")
    import torch  # pylint: disable=import-outside-toplevel

    import tiny_lm  # pylint: disable=import-outside-toplevel

    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    loss_value = 0.0
    for _ in range(steps):
        rows = [demonstration(make_prompt(rng.randrange(1 << 30), 0, max_keys), rng, noise)
                for _ in range(batch)]
        length = max(len(ids) for ids, _ in rows)
        ids = torch.full((batch, length), PAD, dtype=torch.long)
        mask = torch.zeros((batch, length))
        for row, (tokens, bits) in enumerate(rows):
            ids[row, :len(tokens)] = torch.tensor(tokens)
            mask[row, :len(bits)] = torch.tensor(bits, dtype=torch.float)
        logits = model(ids[:, :-1])
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, tiny_lm.VOCAB_SIZE), ids[:, 1:].reshape(-1), reduction="none")
        target_mask = mask[:, 1:].reshape(-1)
        loss = (losses * target_mask).sum() / target_mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss)
    model.eval()
    return loss_value


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prompt_cmd = commands.add_parser("prompt", help="print a prompt's tokens")
    prompt_cmd.add_argument("--seed", type=int, default=0)
    prompt_cmd.add_argument("--index", type=int, required=True)
    prompt_cmd.add_argument("--max-keys", type=int, default=2)
    commands.add_parser("tool", help="run the lookup tool: JSON in on stdin, JSON out")
    commands.add_parser("serve", help="serve the tool over HTTP (--port): POST /tool, GET /health")
    parser.add_argument("--host", default="127.0.0.1", help="serve: the address to listen on")
    parser.add_argument("--port", type=int, default=0, help="serve: the port (0: a free one)")
    commands.add_parser("reward", help="score a final answer: JSON in on stdin, JSON out")
    warm = commands.add_parser("warm-start", help="write warm-started initial weights")
    warm.add_argument("--out", required=True)
    warm.add_argument("--seed", type=int, default=0)
    warm.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)

    if args.command == "prompt":
        prompt = make_prompt(args.seed, args.index, args.max_keys)
        print(json.dumps({"tokens": prompt.tokens(), "keys": len(prompt.keys)}))
    elif args.command == "serve":
        import http_util  # pylint: disable=import-outside-toplevel

        def tool_route(request: "http_util.Request") -> dict:
            body = request.body
            prompt = make_prompt(int(body["seed"]), int(body["prompt"]),
                                 int(body.get("max_keys", 2)))
            tokens, status = run_tool(prompt, [int(t) for t in body["call"]])
            return {"tokens": tokens, "status": status}

        routes = {("POST", "/tool"): tool_route, ("GET", "/health"): lambda _: {"status": "ok"}}
        server = http_util.JsonServer(args.host, args.port, routes,
                                      lambda status, message: {"error": message})
        print(f"toy tool server listening on http://{args.host}:{server.port}", flush=True)
        server.serve_forever()
    elif args.command in ("tool", "reward"):
        request = json.load(sys.stdin)
        prompt = make_prompt(int(request["seed"]), int(request["prompt"]),
                             int(request.get("max_keys", 2)))
        if args.command == "tool":
            tokens, status = run_tool(prompt, [int(t) for t in request["call"]])
            print(json.dumps({"tokens": tokens, "status": status}))
        else:
            print(json.dumps({"reward": reward(prompt, [int(t) for t in request["answer"]])}))
    else:
        import torch  # pylint: disable=import-outside-toplevel

        import tiny_lm  # pylint: disable=import-outside-toplevel

        torch.set_num_threads(1)
        model = tiny_lm.build_model(args.seed)
        loss = warm_start(model, args.seed, steps=args.steps)
        tiny_lm.save_weights(model, args.out)
        print(json.dumps({"out": args.out, "loss": loss}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
