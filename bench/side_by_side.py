#!/usr/bin/env python3
"""Times two commits of libra side by side, in one run, on this machine.

Builds BASE and HEAD (each exported with `git archive` into its own folder, configured
RelWithDebInfo, ccache when present), then runs every scenario with one build and the other in
turn (A B A B ...), so that both see the same machine: absolute times on shared machines move
1.5-4x, ratios taken pair by pair much less. For each scenario it prints the median CPU seconds
(user + system, of the process and its children) of each build, the median of the per-pair
ratios HEAD/BASE, and the peak memory; and it checks that both builds print the same results.

Scenarios (default: the paper recipe, 100 steps, every named system, each as written: a
recipe that tunes its peers would otherwise time the tuning, and refuses to tune Libra alone):
  libra compare RECIPE --as-written --systems S --steps N --db <temporary> -q
Before them, both builds run the whole comparison once (peers tuned when the recipe says so)
and must print the same table.
With --bench, also libra_bench's default scenarios (the same recipes at both commits).

  bench/side_by_side.py --base main --head HEAD
  bench/side_by_side.py --base HEAD~3 --systems libra,verl-sync --runs 7

docs/benchmarks.md records what it printed and the machine.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SYSTEMS = ["libra", "libra-no-ehp", "libra-ref", "libra-homogeneous", "verl-sync",
           "disagg-static", "verl-dynamic", "areal-async", "sortedrl", "heddle"]


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, **kwargs)


def build(repo, rev, root, targets, jobs):
    """Exports `rev` into root/<sha> and builds `targets`; returns the build folder."""
    sha = run(["git", "-C", repo, "rev-parse", "--verify", rev + "^{commit}"],
              capture_output=True, text=True).stdout.strip()
    src = os.path.join(root, sha[:12], "src")
    out = os.path.join(root, sha[:12], "build")
    if not os.path.isdir(src):
        os.makedirs(src)
        archive = subprocess.Popen(["git", "-C", repo, "archive", sha], stdout=subprocess.PIPE)
        run(["tar", "-x", "-C", src], stdin=archive.stdout)
        if archive.wait() != 0:
            sys.exit(f"git archive {rev} failed")
    if not os.path.isfile(os.path.join(out, "build.ninja")):
        cmake = ["cmake", "-S", src, "-B", out, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
        if shutil.which("ccache"):
            cmake.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        run(cmake, stdout=subprocess.DEVNULL)
    for target in targets:
        result = subprocess.run(["cmake", "--build", out, "-j", str(jobs), "--target", target],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if result.returncode != 0 and target == "libra":
            sys.exit(f"building {rev} failed: cmake --build {out} --target libra")
    print(f"{rev}: {sha[:12]} built in {out}", flush=True)
    return out


def measure(cmd):
    """Runs `cmd`; returns (cpu seconds, peak KiB, stdout and stderr, exit code)."""
    with tempfile.TemporaryFile() as captured:
        process = subprocess.Popen(cmd, stdout=captured, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        captured.seek(0)
        text = captured.read().decode(errors="replace")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, text, os.waitstatus_to_exitcode(status)


def scenarios(args, builds, scratch):
    """(name, {side: command}) for every scenario both builds can run."""
    recipe = os.path.abspath(args.recipe)
    for system in args.systems.split(","):
        yield system, {
            side: [os.path.join(out, "libra"), "compare", recipe, "--as-written", "--systems",
                   system, "--steps", str(args.steps), "--db",
                   os.path.join(scratch, f"{side}-{system}.db"), "-q"]
            for side, out in builds.items()}
    if args.bench:
        for tool in ["libra_bench"]:
            paths = {side: os.path.join(out, "bench", tool) for side, out in builds.items()}
            if all(os.path.isfile(p) for p in paths.values()):
                yield tool, {side: [p] for side, p in paths.items()}


def same_results(builds, args, scratch):
    """Whether both builds print the same comparison table for every system."""
    tables = {}
    for side, out in builds.items():
        db = os.path.join(scratch, f"check-{side}.db")
        # A system that fails (libra-ref's plan does not fit memory on some recipes) is a result
        # too: both builds must fail it the same way.
        _, _, text, code = measure([os.path.join(out, "libra"), "compare",
                                    os.path.abspath(args.recipe), "--systems", args.systems,
                                    "--steps", str(args.steps), "--db", db])
        tables[side] = (code, [line for line in text.splitlines() if "recorded in" not in line])
    return tables["base"] == tables["head"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare against")
    parser.add_argument("--head", default="HEAD", help="the commit measured")
    parser.add_argument("--recipe", default=os.path.join(os.path.dirname(__file__), "..", "recipes",
                                                         "paper", "r2e-gym-qwen3-14b.toml"))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each build")
    parser.add_argument("--bench", action="store_true", help="also libra_bench")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "libra-side-by-side"),
                        help="where the builds go (kept, reused for the same commit)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()

    repo = run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
               cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    targets = ["libra"] + (["libra_bench"] if args.bench else [])
    builds = {"base": build(repo, args.base, args.work, targets, args.jobs),
              "head": build(repo, args.head, args.work, targets, args.jobs)}
    with tempfile.TemporaryDirectory() as scratch:
        print(f"same results: {'yes' if same_results(builds, args, scratch) else 'NO'}")
        print(f"{'scenario':<22} {'base cpu s':>10} {'head cpu s':>10} {'head/base':>10} "
              f"{'base MiB':>9} {'head MiB':>9}")
        for name, commands in scenarios(args, builds, scratch):
            cpu = {"base": [], "head": []}
            peak = {"base": 0, "head": 0}
            failed = set()
            for _ in range(args.runs):
                for side in ("base", "head"):
                    seconds, kib, _, code = measure(commands[side])
                    if code != 0:
                        failed.add(side)
                    cpu[side].append(seconds)
                    peak[side] = max(peak[side], kib)
            if failed:
                print(f"{name:<22} failed on {' and '.join(sorted(failed))} (exit status not 0)",
                      flush=True)
                continue
            ratios = [h / b for b, h in zip(cpu["base"], cpu["head"]) if b > 0]
            print(f"{name:<22} {statistics.median(cpu['base']):>10.3f} "
                  f"{statistics.median(cpu['head']):>10.3f} {statistics.median(ratios):>10.3f} "
                  f"{peak['base'] / 1024:>9.0f} {peak['head'] / 1024:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
