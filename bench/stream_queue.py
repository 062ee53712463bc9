#!/usr/bin/env python3
"""Stream batches as a queue of groups, replayed against the simulation.

With `batching = "stream"` a step trains the first complete groups and rejects those that would
lag beyond the staleness bound, so the long groups are trained less (docs/planner.md, "Stream
batches"). The planner predicts a stream pipeline by replaying a queue of whole groups on its own
latency estimates (src/planner/stream_model.h); this tool measures how much of the simulation the
same queue explains when it is given the simulation's own latencies:

1. it runs the recipe twice with `libra run` (the same seed and steps): ordered, then stream;
2. from the ordered run it takes each group's latency (its first sample's start to its last
   sample's end), its generated tokens, and the mean train and sync times of a step;
3. it replays the coordinator's stream rules on those groups alone (launch at most
   (version + staleness + 1) x prompts_per_step groups plus one for each rejected, a batch of the
   first prompts_per_step complete groups once the step before has trained and synced, stale
   groups rejected when a batch forms), each group taking its ordered latency scaled by each
   --scale, training at the ordered run's time per generated token;
4. it prints the simulated stream run's rejected groups, tokens per trained trajectory and step
   beside the replay's, and what dropping the simulated share of groups with the longest sample
   would leave.

  python3 bench/stream_queue.py --libra build/libra recipes/paper/r2e-gym-qwen3-14b.toml
  python3 bench/stream_queue.py --libra build/libra --set system.staleness=1 RECIPE...

The replay here is a measurement, not the planner's model: its latencies are the simulation's
own, and its rollout side never runs out of throughput.
"""

import argparse
import heapq
import os
import sqlite3
import subprocess
import sys
import tempfile
import tomllib


def run(args, recipe, db, batching):
    cmd = [args.libra, "run", "-q", "--steps", str(args.steps), "--seed", str(args.seed),
           "--db", db, "--set", f"system.batching={batching}"]
    for setting in args.set:
        cmd += ["--set", setting]
    cmd.append(recipe)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"stream_queue: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")


def read_run(db):
    """The run's groups (latency s, generated tokens, samples, the longest sample's tokens),
    steps and pipeline settings."""
    con = sqlite3.connect(db)
    row = con.execute("SELECT staleness, resolved_recipe FROM runs").fetchone()
    if row is None or row[0] is None:
        sys.exit(f"stream_queue: {db} holds no run with its staleness")
    rl = tomllib.loads(row[1]).get("rl", {})
    groups = {}
    for prompt, start, end, tokens in con.execute(
            "SELECT prompt, start_s, end_s, generated_tokens FROM trajectories ORDER BY prompt"):
        g = groups.setdefault(prompt, [float("inf"), 0.0, 0, 0, 0])
        g[0] = min(g[0], start)
        g[1] = max(g[1], end)
        g[2] += tokens
        g[3] += 1
        g[4] = max(g[4], tokens)
    steps = con.execute(
        "SELECT end_s, train_s, sync_s FROM steps ORDER BY step").fetchall()
    rejected = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'reject'").fetchone()[0]
    con.close()
    if len(steps) < 4 or not groups:
        sys.exit(f"stream_queue: {db} has {len(steps)} steps and {len(groups)} groups; "
                 "give --steps 4 or more")
    return {
        "staleness": row[0],
        "per_step": int(rl.get("prompts_per_step", 1)),
        "groups": [(g[1] - g[0], g[2], g[3], g[4]) for g in groups.values()],
        "steps": steps,
        "rejected": rejected,
    }


def period(ends):
    """Mean step after the first quarter of the run (the pipeline fills first)."""
    first = len(ends) // 4
    return (ends[-1] - ends[first]) / (len(ends) - 1 - first)


def replay(groups, per_step, staleness, steps, train_per_token, sync_s):
    """The coordinator's stream rules on groups of fixed latency: (rejected share, generated
    tokens per trained group, mean step)."""
    running = []  # (done at, launch number, group, version at launch)
    complete = []  # (group, version), in completion order
    launched = rejected = trained_groups = trained_tokens = 0
    version = 0
    ends = []

    def launch(now):
        nonlocal launched
        allowed = min(steps, version + staleness + 1) * per_step + rejected
        while launched < allowed:
            g = launched % len(groups)
            heapq.heappush(running, (now + groups[g][0], launched, g, version))
            launched += 1

    step_end = 0.0
    launch(0.0)
    for k in range(steps):
        now = step_end
        while True:
            while running and running[0][0] <= now:
                _, _, g, v = heapq.heappop(running)
                complete.append((g, v))
            fresh = [(g, v) for g, v in complete if k - v <= staleness]
            rejected += len(complete) - len(fresh)
            complete = fresh
            launch(now)
            if len(complete) >= per_step:
                break
            now = running[0][0]
        batch, complete = complete[:per_step], complete[per_step:]
        tokens = sum(groups[g][1] for g, _ in batch)
        step_end = now + tokens * train_per_token + sync_s
        ends.append(step_end)
        trained_groups += len(batch)
        trained_tokens += tokens
        version = k + 1
        launch(step_end)
    return rejected / (rejected + trained_groups), trained_tokens / trained_groups, period(ends)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", nargs="+", help="recipes whose [rl] staleness is at least 1")
    parser.add_argument("--libra", default="build/libra")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to both runs (repeatable), e.g. system.staleness=1")
    parser.add_argument("--scale", default="0.8,1,1.2",
                        help="factors on the ordered latencies, comma-separated")
    args = parser.parse_args()
    scales = [float(s) for s in args.scale.split(",")]
    if args.steps < 4 or any(s <= 0 for s in scales):
        sys.exit("stream_queue: --steps must be at least 4 and every --scale positive")
    rows = ["recipe | run | rejected groups | tokens per trained trajectory | step s",
            "--- | --- | ---: | ---: | ---:"]
    with tempfile.TemporaryDirectory() as work:
        for recipe in args.recipe:
            name = os.path.splitext(os.path.basename(recipe))[0]
            ordered_db = os.path.join(work, name + "-ordered.db")
            stream_db = os.path.join(work, name + "-stream.db")
            run(args, recipe, ordered_db, "ordered")
            run(args, recipe, stream_db, "stream")
            ordered = read_run(ordered_db)
            stream = read_run(stream_db)
            if ordered["staleness"] < 1:
                sys.exit(f"stream_queue: {recipe} is synchronous: no group can lag")
            groups = ordered["groups"]
            samples = sum(g[2] for g in groups)
            tokens = sum(g[1] for g in groups)
            per_trajectory = tokens / samples
            body = ordered["steps"][len(ordered["steps"]) // 4:]
            train_s = sum(s[1] for s in body) / len(body)
            sync_s = sum(s[2] for s in body) / len(body)
            per_group = tokens / len(groups)
            train_per_token = train_s / (ordered["per_step"] * per_group)
            rows.append(f"{name} | ordered, simulated | - | {per_trajectory:,.0f} | "
                  f"{period([s[0] for s in ordered['steps']]):.1f}")
            trained = stream["groups"]
            share = stream["rejected"] / (stream["rejected"] + len(trained))
            stream_tokens = sum(g[1] for g in trained) / sum(g[2] for g in trained)
            rows.append(f"{name} | stream, simulated | {100 * share:.1f}% | {stream_tokens:,.0f} "
                  f"({100 * (stream_tokens / per_trajectory - 1):+.1f}%) | "
                  f"{period([s[0] for s in stream['steps']]):.1f}")
            # The simulated share of groups dropped, those with the longest sample first.
            by_length = sorted(groups, key=lambda g: g[3])
            kept = by_length[:round(len(groups) * (1 - share))]
            kept_tokens = sum(g[1] for g in kept) / sum(g[2] for g in kept)
            rows.append(f"{name} | ordered groups less the longest {100 * share:.1f}% | - | "
                  f"{kept_tokens:,.0f} ({100 * (kept_tokens / per_trajectory - 1):+.1f}%) | -")
            for scale in scales:
                scaled = [(g[0] * scale,) + g[1:] for g in groups]
                r, trained_per_group, step = replay(scaled, stream["per_step"], stream["staleness"],
                                                    args.steps, train_per_token, sync_s)
                change = trained_per_group / per_group - 1
                rows.append(f"{name} | queue replay, latencies x{scale:g} | {100 * r:.1f}% | "
                      f"{per_trajectory * (1 + change):,.0f} ({100 * change:+.1f}%) | {step:.1f}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
