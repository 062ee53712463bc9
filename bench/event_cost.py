#!/usr/bin/env python3
"""Cost per simulated event, a large cluster against a small one, on one core.

The speed target "cost per simulated event flat in cluster size" (docs/benchmarks.md, top table)
compares CPU microseconds per event of `libra_bench` on the 8,192-GPU scenario with the paper
recipe's 48 GPUs. This VM's speed moves 1.5x within minutes, and the large run (bound by memory)
moves differently from the small one (which fits the caches), so one pair of runs says little.
Each round here runs the small recipe --around times, the large recipe once, and the small recipe
--around times again, all pinned to one CPU, and takes the large run's cost per event over the
median of the small runs around it. It prints every run, each round's ratio and their median;
every run of a recipe must simulate the same events.

  python3 bench/event_cost.py --bench build/bench/libra_bench --rounds 3
  python3 bench/event_cost.py --bench build/bench/libra_bench --large bench/large-1024.toml \\
      --large-steps 20
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, recipe, steps):
    """One libra_bench run; returns (events, us an event, CPU s, peak MiB)."""
    cmd = [args.bench, "--steps", str(steps), "--system", args.system, recipe]
    if args.cpu >= 0 and shutil.which("taskset") and args.cpu < os.cpu_count():
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"event_cost: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    # scenario system GPUs steps cpu-s wall-s us/event MiB simulated-s GPU-s/cpu-s events ...
    row = done.stdout.strip().splitlines()[-1].split()
    if len(row) < 11:
        sys.exit(f"event_cost: unexpected libra_bench output:\n{done.stdout}")
    return int(row[10]), float(row[6]), float(row[4]), int(row[7])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/bench/libra_bench", help="libra_bench to run")
    parser.add_argument("--system", default="libra")
    parser.add_argument("--small", default=os.path.join(HERE, "..", "recipes", "paper",
                                                        "r2e-gym-qwen3-14b.toml"))
    parser.add_argument("--small-steps", type=int, default=100)
    parser.add_argument("--large", default=os.path.join(HERE, "large-8192.toml"))
    parser.add_argument("--large-steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--around", type=int, default=3,
                        help="small runs before and after each large one")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to pin to (-1: none)")
    args = parser.parse_args()
    if args.rounds < 1 or args.around < 1:
        sys.exit("event_cost: --rounds and --around must be at least 1")

    events = {}
    ratios = []
    for r in range(1, args.rounds + 1):
        small = []
        for k in range(2 * args.around + 1):
            large = k == args.around
            recipe, steps = (args.large, args.large_steps) if large else (args.small,
                                                                         args.small_steps)
            n, us, cpu, mib = run(args, recipe, steps)
            if events.setdefault(recipe, n) != n:
                sys.exit(f"event_cost: {recipe} simulated {n} events, {events[recipe]} before")
            print(f"round {r}: {'large' if large else 'small'} {us:.3f} us an event "
                  f"({cpu:.2f} s CPU, {mib} MiB, {n} events)", flush=True)
            if large:
                large_us = us
            else:
                small.append(us)
        ratio = large_us / statistics.median(small)
        ratios.append(ratio)
        print(f"round {r}: ratio {ratio:.2f} ({large_us:.3f} against {statistics.median(small):.3f}"
              " us, the median of the small runs around it)", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f} over {len(ratios)} rounds "
          f"(from {min(ratios):.2f} to {max(ratios):.2f})")


if __name__ == "__main__":
    main()
