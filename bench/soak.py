#!/usr/bin/env python3
"""Soak benchmark: the CPU cluster recipe under faults (docs/benchmarks.md, "Faults counted").

Runs `libra run` on recipes/cpu-local.toml (real engines, trainer and tools on CPU) for enough
steps to make at least --turns turns, and meanwhile injects faults at random times (exponential
gaps of mean --mean-gap seconds, from a seeded generator):

  engine-kill    SIGKILL one rollout engine          (libra restarts it)
  trainer-kill   SIGKILL the trainer, lent or not     (restarted from its last checkpoint)
  tool-kill      SIGKILL one running tool call        (a failed tool call)
  engine-stop    SIGSTOP one engine for --stop-s s    (hung, not dead), then SIGCONT
  trainer-stop   SIGSTOP the trainer for --stop-s s, then SIGCONT
  libra-kill     SIGKILL libra itself; then `libra run --resume RUN`

and reports, from the database and /proc:

  trajectories lost    trained batches short of prompts_per_step x group_size, and groups with
                       fewer than group_size samples (0 expected); groups dropped because they were
                       in flight when libra died are counted apart (documented: docs/cluster.md)
  steps recorded twice steps or (prompt, sample) pairs recorded more than once (0 expected)
  processes left       processes of the run still alive 5 s after each libra kill, and at the end
  time to recover      per fault, seconds from the fault to the next step recorded

Usage: bench/soak.py --libra build/libra [--turns 10000] [--seed 1] [--mean-gap 20]
                     [--eval-interval N]
Writes its database and logs under --work (default: a new folder in /tmp) and prints a summary
(also as JSON with --json FILE).
"""
import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

FAULTS = ["engine-kill", "trainer-kill", "tool-kill", "engine-stop", "trainer-stop", "libra-kill"]


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def alive(pid):
    return state(pid) not in ("", "Z", "X")


def children(pid):
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return found


def descendants(pid):
    found = children(pid)
    for child in found:
        found += [c for c in children(child) if c not in found]
    return found


def ancestors():
    """This process and the ones it runs under (a wrapper such as `timeout` names the work
    folder too)."""
    found = [os.getpid()]
    while found[-1] > 1:
        try:
            with open(f"/proc/{found[-1]}/stat") as f:
                found.append(int(f.read().rsplit(")", 1)[1].split()[1]))
        except (OSError, IndexError, ValueError):
            break
    return set(found)


def run_processes(marker):
    """Live processes whose command line names the run's work folder or libra's workers there."""
    found = []
    own = ancestors()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in own:
            line = cmdline(int(name))
            if marker in line and alive(int(name)):
                found.append((int(name), line))
    return found


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = args.work
        self.db = os.path.join(self.work, "soak.db")
        self.recipe = os.path.join(self.work, "cpu-local.toml")
        self.faults = []  # {kind, at, pid, recovered_s}
        self.left_after_kills = []
        self.left_commands = []  # the command lines of those processes
        self.libra = None
        self.libra_log = None
        self.run_id = None
        self.resumes = 0
        self.seen = {}  # pid -> command line of every process seen under libra

    def setup(self):
        os.makedirs(self.work, exist_ok=True)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # The recipe as shipped, its paths anchored in the repository.
        with open(os.path.join(repo, "recipes", "cpu-local.toml")) as f:
            text = f.read()
        text = text.replace('initial_weights = "../results/cache/',
                            f'initial_weights = "{repo}/results/cache/')
        with open(self.recipe, "w") as f:
            f.write(text)

    def start(self, resume):
        self.libra_log = open(os.path.join(self.work, f"libra-{self.resumes}.log"), "w")
        if resume:
            argv = [self.args.libra, "run", "--resume", str(self.run_id), "--db", self.db, "-q"]
        else:
            argv = [self.args.libra, "run", self.recipe, "--db", self.db, "-q",
                    "--steps", str(self.args.steps), "--seed", str(self.args.seed),
                    "--set", f"eval.interval={self.args.eval_interval}"]
        self.libra = subprocess.Popen(argv, stdout=self.libra_log, stderr=subprocess.STDOUT,
                                      cwd=self.work)

    def query(self, sql, *params):
        try:
            con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
            try:
                return con.execute(sql, params).fetchall()
            finally:
                con.close()
        except sqlite3.Error:
            return []

    def steps_done(self):
        rows = self.query("SELECT count(*) FROM steps WHERE run_id = ?", self.run_id or 1)
        return rows[0][0] if rows else 0

    def targets(self, kind):
        procs = [(pid, cmdline(pid)) for pid in descendants(self.libra.pid) if alive(pid)]
        if kind.startswith("engine"):
            return [p for p, line in procs if "rollout_server.py" in line]
        if kind.startswith("trainer"):
            return [p for p, line in procs if "trainer.py" in line]
        if kind == "tool-kill":
            return [p for p, line in procs if "toy_task.py tool" in line]
        return []

    def inject(self, kind):
        now = time.monotonic()
        if kind == "libra-kill":
            pid = self.libra.pid
            before = descendants(pid)
            self.libra.send_signal(signal.SIGKILL)
            self.libra.wait()
            time.sleep(5)
            left = {p for p in before if alive(p)} | {p for p, _ in run_processes(self.args.marker)}
            self.left_after_kills.append(len(left))
            self.left_commands += [cmdline(p)[:200] for p in sorted(left)]
            for pid_left in left:
                try:
                    os.kill(pid_left, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.resumes += 1
            self.start(resume=True)
        else:
            pids = self.targets(kind)
            if not pids:
                return False
            pid = self.rng.choice(pids)
            if kind.endswith("-stop"):
                os.kill(pid, signal.SIGSTOP)
                time.sleep(self.args.stop_s)
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    return False
        self.faults.append({"kind": kind, "at": now, "pid": pid, "step": self.steps_done(),
                            "recovered_s": None})
        return True

    def note_progress(self):
        done = self.steps_done()
        for fault in self.faults:
            if fault["recovered_s"] is None and done > fault["step"]:
                fault["recovered_s"] = time.monotonic() - fault["at"]

    def loop(self):
        self.start(resume=False)
        deadline = time.monotonic() + self.args.max_hours * 3600
        next_fault = time.monotonic() + self.rng.expovariate(1 / self.args.mean_gap)
        while time.monotonic() < deadline:
            if self.run_id is None:
                rows = self.query("SELECT max(id) FROM runs")
                self.run_id = rows[0][0] if rows and rows[0][0] else None
            code = self.libra.poll()
            self.note_progress()
            for pid in descendants(self.libra.pid):
                self.seen.setdefault(pid, cmdline(pid))
            if code is not None:
                if code == 0:
                    return True
                # A run that failed (not killed by us): resume it like a crash, a few times.
                if self.resumes >= self.args.max_resumes:
                    return False
                self.resumes += 1
                self.faults.append({"kind": f"libra-exit-{code}", "at": time.monotonic(),
                                    "pid": self.libra.pid, "step": self.steps_done(),
                                    "recovered_s": None})
                self.start(resume=True)
            elif time.monotonic() >= next_fault and self.run_id is not None:
                self.inject(self.rng.choice(FAULTS))
                next_fault = time.monotonic() + self.rng.expovariate(1 / self.args.mean_gap)
            time.sleep(0.2)
        return False

    def report(self, finished):
        time.sleep(5)
        left_end = run_processes(self.args.marker) + [
            (pid, line) for pid, line in self.seen.items() if alive(pid) and cmdline(pid) == line]
        left_end = list(dict(left_end).items())
        run = self.run_id or 1
        info = self.query("SELECT status, error, steps_planned FROM runs WHERE id = ?", run)
        p, g = self.args.prompts_per_step, self.args.group_size
        steps = self.query("SELECT step, trajectories, turns FROM steps WHERE run_id = ? ORDER BY "
                           "step", run)
        short_batches = sum(1 for _, n, _ in steps if n != p * g)
        dup_steps = len(steps) - len({s for s, _, _ in steps})
        dup_samples = self.query(
            "SELECT count(*) FROM (SELECT prompt, sample FROM trajectories WHERE run_id = ? "
            "GROUP BY prompt, sample HAVING count(*) > 1)", run)[0][0]
        short_groups = self.query(
            "SELECT count(*) FROM (SELECT prompt FROM trajectories WHERE run_id = ? "
            "GROUP BY prompt HAVING count(*) <> ?)", run, g)[0][0]
        prompts = [r[0] for r in self.query(
            "SELECT DISTINCT prompt FROM trajectories WHERE run_id = ? ORDER BY prompt", run)]
        skipped = (prompts[-1] + 1 - len(prompts)) if prompts else 0
        events = dict(self.query("SELECT kind, count(*) FROM events WHERE run_id = ? GROUP BY "
                                 "kind", run))
        by_kind = {}
        for f in self.faults:
            by_kind.setdefault(f["kind"], []).append(f["recovered_s"])
        summary = {
            "finished": finished,
            "status": info[0][0] if info else None,
            "error": info[0][1] if info else None,
            "steps": len(steps),
            "turns": sum(t for _, _, t in steps),
            "trajectories": sum(n for _, n, _ in steps),
            "trajectories_lost": short_batches * p * g + short_groups,
            "groups_dropped_in_flight_at_libra_kills": skipped,
            "steps_recorded_twice": dup_steps + dup_samples,
            "processes_left_after_libra_kills": sum(self.left_after_kills),
            "processes_left_after_libra_kills_commands": self.left_commands,
            "processes_left_at_end": len(left_end),
            "processes_left_at_end_commands": [line[:200] for _, line in left_end],
            "libra_resumes": self.resumes,
            "events": events,
            "faults": {k: {"count": len(v),
                           "recovered": sum(1 for x in v if x is not None),
                           "mean_recover_s": round(sum(x for x in v if x is not None) /
                                                   max(1, sum(1 for x in v if x is not None)), 1),
                           "max_recover_s": round(max([x for x in v if x is not None] or [0]), 1)}
                       for k, v in sorted(by_kind.items())},
        }
        print(json.dumps(summary, indent=2))
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(summary, f, indent=2)
        for pid, _ in left_end:
            os.kill(pid, signal.SIGKILL)
        ok = (finished and summary["trajectories_lost"] == 0 and
              summary["steps_recorded_twice"] == 0 and summary["processes_left_at_end"] == 0 and
              summary["processes_left_after_libra_kills"] == 0)
        return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--libra", required=True)
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--turns-per-step", type=float, default=75,
                        help="turns one step of the recipe makes (sets --steps; measured ~80)")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--eval-interval", type=int, default=1000000,
                        help="the recipe's [eval] interval (default: evaluate the first and last "
                             "versions only; faults, not evaluation, are what is measured)")
    parser.add_argument("--mean-gap", type=float, default=20.0)
    parser.add_argument("--stop-s", type=float, default=8.0)
    parser.add_argument("--max-hours", type=float, default=4.0)
    parser.add_argument("--max-resumes", type=int, default=50)
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--work", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    args.libra = os.path.abspath(args.libra)
    if not args.work:
        args.work = subprocess.check_output(["mktemp", "-d", "/tmp/libra-soak-XXXXXX"]).decode().strip()
    args.work = os.path.abspath(args.work)
    args.marker = args.work
    if args.steps == 0:
        args.steps = int(args.turns / args.turns_per_step) + 1
    soak = Soak(args)
    soak.setup()
    print(f"soak: {args.steps} steps, faults every {args.mean_gap} s on average, in {args.work}",
          file=sys.stderr)
    finished = soak.loop()
    if soak.libra and soak.libra.poll() is None:
        soak.libra.send_signal(signal.SIGINT)
        soak.libra.wait()
    return soak.report(finished)


if __name__ == "__main__":
    sys.exit(main())
