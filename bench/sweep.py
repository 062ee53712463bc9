#!/usr/bin/env python3
"""Recipe sweep: libra on random recipes nobody wrote for it (docs/benchmarks.md, "Random
recipes").

Draws --count recipes from a seeded generator over the recipe space: cluster (1-6 nodes of 4 or 8
A800 or H100 GPUs), model (dense 0.6B-14B and the 30B-A3B MoE), workload preset, prompts and
group size, staleness and sync interval, the engines' limits, KV policy, sync path and tool
concurrency, and a system: a named one, sometimes with its router, planner, batching, staleness
or partial rollout overridden, or a bare router and planner. Then, per mode:

  runs   `libra run` on each: it must finish (exit 0) or be refused as a recipe error (exit 2,
         with a message); anything else is listed: a failed run, a stall, a timeout, a crash.
         One failure is known and counted apart: `libra-ref` (the authors' optimizer, with its
         own memory model) plans training layouts that the roofline model runs out of memory in
         (docs/planner.md).
  check  `libra plan --check` on each, with system `libra` or `libra-homogeneous`: the step and
         phase errors of the planner's prediction against a simulation of its plan, and how many
         fall outside the limits of the fidelity gate (step 10%, each phase 15%), then those
         outside counted by workload, system, KV policy and pipeline (sync or async).
  regret `libra_regret_bench` on the same kind of recipes: how much slower, simulated, the plan
         the planner chooses is than the best layout of its search space; those above 5% listed
         and counted by the same traits.

Usage: bench/sweep.py [--libra build/libra] [--regret-bench build/bench/libra_regret_bench]
                      {runs|check|regret} [--count N] [--seed S] [--work DIR]
Exit status 1 when a run fails unexpectedly (runs) or a check or benchmark cannot run.
"""
import argparse
import csv
import io
import os
import random
import re
import subprocess
import sys
import tempfile
import tomllib

PRESETS = ["libra", "libra-no-ehp", "libra-ref", "libra-homogeneous", "verl-sync",
           "disagg-static", "verl-dynamic", "areal-async", "sortedrl", "heddle"]
ROUTERS = ["cmlfq", "heddle", "la-mlfq", "least-conn", "length-aware", "oracle-length",
           "round-robin", "sorted"]
PLANNERS = ["colocated", "grp", "heddle", "libra-ref", "no-ehp", "static"]
MODELS = ["Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-8B", "Qwen3-14B", "Qwen3-30B-A3B"]
WORKLOADS = ["search-r1", "r2e-gym", "dapo-math", "swe-long"]
KNOWN = re.compile(r"run 1 \((.*)\) failed: sim: train step 0 runs out of memory")
REGRET = re.compile(r"chosen: (.*), [0-9.]+ s a step\n  best: +(.*), [0-9.]+ s a step\n"
                    r"  regret: (-?[0-9.]+)%")


def draw(rng, name, check):
    """One recipe (TOML text)."""
    staleness = rng.choice([0, 1, 2, 3] if not check else [0, 1, 2])
    lines = [
        f'name = "{name}"', f"seed = {rng.randint(1, 9)}",
        f"steps = {20 if check else rng.choice([5, 12, 30])}",
        "[cluster]", f'gpu = "{rng.choice(["A800-80G", "H100-80G"])}"',
        f"nodes = {rng.choice([1, 2, 3, 4, 6])}", f"gpus_per_node = {8 if check else rng.choice([4, 8])}",
        "[model]", f'name = "{rng.choice(MODELS[1:] if check else MODELS)}"',
        "[workload]", 'kind = "agentic"', f'preset = "{rng.choice(WORKLOADS)}"',
        "[rl]", f"prompts_per_step = {rng.choice([8, 16, 32] if check else [1, 3, 8, 16])}",
        f"group_size = {rng.choice([4, 8] if check else [1, 2, 4, 8])}",
        f"staleness = {staleness}", f"sync_interval = {1 if check else rng.randint(1, staleness + 1)}",
        "[sim]", f"max_num_seqs = {rng.choice([64, 256] if check else [4, 32, 256])}",
        f'kv_policy = "{rng.choice(["cache", "free"])}"',
    ]
    if not check:
        lines += [f"max_batched_tokens = {rng.choice([1024, 8192])}",
                  f'sync_path = "{rng.choice(["nccl", "disk"])}"',
                  f"tool_concurrency = {rng.choice([0, 0, 2, 16])}"]
    lines.append("[system]")
    if check:
        lines.append(f'preset = "{rng.choice(["libra", "libra-homogeneous"])}"')
    else:
        preset = rng.choice(PRESETS + [None])
        if preset:
            lines.append(f'preset = "{preset}"')
        if not preset or rng.random() < 0.3:
            lines.append(f'router = "{rng.choice(ROUTERS)}"')
        if not preset or rng.random() < 0.2:
            lines.append(f'planner = "{rng.choice(PLANNERS)}"')
        if rng.random() < 0.5:
            lines.append(f'batching = "{rng.choice(["ordered", "stream"])}"')
        if rng.random() < 0.3:
            lines.append(f"partial_rollout = {rng.choice(['true', 'false'])}")
        if rng.random() < 0.3:
            lines.append(f"staleness = {rng.choice([0, 1, 2])}")
    return "\n".join(lines) + "\n"


def drawn(args, rng, work, prefix, check):
    """Draws --count recipes into `work` as PREFIX0.toml, PREFIX1.toml, ...: (path, text) each."""
    for i in range(args.count):
        path = os.path.join(work, f"{prefix}{i}.toml")
        recipe = draw(rng, f"{prefix}{i}", check)
        with open(path, "w") as f:
            f.write(recipe)
        yield path, recipe


def fits_no_plan(stderr):
    """Whether libra refused the recipe because no plan fits its cluster (nothing to compare)."""
    return "no feasible plan" in stderr or "no plan fits" in stderr


def run(cmd, timeout):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def sweep_runs(args, rng, work):
    ok = refused = known = 0
    failures = []
    for path, recipe in drawn(args, rng, work, "r", False):
        db = os.path.join(work, "sweep.db")
        if os.path.exists(db):
            os.remove(db)
        rc, out, err = run([args.libra, "run", path, "--db", db, "-q"], args.timeout)
        text = (out + err).strip()
        if rc == 0:
            ok += 1
        elif rc == 2 and text:
            refused += 1
        elif rc == 1 and KNOWN.search(text) and "libra-ref" in recipe:
            known += 1
        else:
            failures.append(f"{path}: exit {rc}: {text[-300:]}")
    print(f"{args.count} recipes (seed {args.seed}): {ok} ran, {refused} refused as recipe errors, "
          f"{known} libra-ref plans out of training memory (known), {len(failures)} failed")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


def sweep_check(args, rng, work):
    rows = []
    errors = 0
    for path, _ in drawn(args, rng, work, "c", True):
        rc, out, err = run([args.libra, "plan", "--check", path, "--format", "csv", "--table",
                            "check"], args.timeout)
        if rc not in (0, 1) or not out.startswith("system,"):
            if fits_no_plan(err):
                continue
            errors += 1
            print(f"  {path}: exit {rc}: {(out + err).strip()[-300:]}")
            continue
        phases = {r["phase"]: float(r["error"]) for r in csv.DictReader(io.StringIO(out))}
        rows.append((path, phases))
    steps = sorted(p["step"] for _, p in rows)
    outside = [(path, p) for path, p in rows if abs(p["step"]) > 0.10]
    phase_out = sum(1 for _, p in rows
                    if any(abs(v) > 0.15 for k, v in p.items() if k not in ("step", "sync")))
    if steps:
        print(f"{len(rows)} plans checked (seed {args.seed}): step error median "
              f"{100 * steps[len(steps) // 2]:+.1f}%, from {100 * steps[0]:+.1f}% to "
              f"{100 * steps[-1]:+.1f}%; {len(outside)} outside 10%, {phase_out} with a phase "
              f"outside 15%")
    for path, p in outside:
        print(f"  {path}: " + ", ".join(f"{k} {100 * v:+.1f}%" for k, v in p.items()))
    print_breakdown("outside 10%", [(path, abs(p["step"]) > 0.10) for path, p in rows])
    return 1 if errors else 0


def sweep_regret(args, rng, work):
    rows = []
    errors = []
    for path, _ in drawn(args, rng, work, "c", True):  # the recipes `check` draws
        rc, out, err = run([args.regret_bench, path], args.timeout)
        found = REGRET.search(out)
        if rc == 0 and found:
            rows.append((path, float(found.group(3)) / 100, found.group(1), found.group(2)))
        elif not fits_no_plan(err):
            errors.append(f"{path}: exit {rc}: {(out + err).strip()[-300:]}")
    regrets = sorted(r for _, r, _, _ in rows)
    above = [row for row in rows if row[1] > 0.05]
    if regrets:
        print(f"{len(rows)} recipes (seed {args.seed}): regret median "
              f"{100 * regrets[len(regrets) // 2]:.1f}%, mean "
              f"{100 * sum(regrets) / len(regrets):.1f}%, max {100 * regrets[-1]:.1f}%; "
              f"{len(above)} above 5%")
    for path, regret, chosen, best in above:
        print(f"  {path}: {100 * regret:.1f}%: chose {chosen}, best {best}")
    print_breakdown("above 5%", [(path, regret > 0.05) for path, regret, _, _ in rows])
    for e in errors:
        print("  " + e)
    return 1 if errors else 0


def traits(path):
    """What a drawn recipe is, for the breakdown: workload, system, KV policy, pipeline."""
    with open(path, "rb") as f:
        r = tomllib.load(f)
    workload = r.get("workload", {})
    return {
        "workload": workload.get("preset", workload.get("kind", "?")),
        "system": r.get("system", {}).get("preset", r.get("system", {}).get("name", "?")),
        "kv_policy": r.get("sim", {}).get("kv_policy", "cache"),
        "pipeline": "async" if r.get("rl", {}).get("staleness", 0) > 0 else "sync",
    }


def print_breakdown(label, rows):
    """Of `rows` (recipe path, whether it counts), how many count, by each trait of the recipes."""
    counts = {}
    for path, counted in rows:
        for key, value in traits(path).items():
            n, total = counts.setdefault(key, {}).get(value, (0, 0))
            counts[key][value] = (n + counted, total + 1)
    for key, by_value in counts.items():
        print(f"{label} by {key}: " + ", ".join(
            f"{value} {n} of {total}" for value, (n, total) in sorted(by_value.items())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["runs", "check", "regret"])
    parser.add_argument("--libra", default="build/libra")
    parser.add_argument("--regret-bench", default="build/bench/libra_regret_bench")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per command")
    parser.add_argument("--work", help="folder for the recipes (default: a new one in /tmp)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="libra-sweep-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"recipes in {work}")
    modes = {"runs": sweep_runs, "check": sweep_check, "regret": sweep_regret}
    sys.exit(modes[args.mode](args, rng, work))


if __name__ == "__main__":
    main()
