#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the Slurm launcher's tests: Debian's munge,
# slurmctld and slurmd (scripts/install-deps.sh installs them), configured in a folder of its own
# and started as root. Nothing outside that folder changes but munge's runtime folder.
#
#   scripts/slurm-local.sh start DIR   # prints the SLURM_CONF to export; exits 0 once the node is idle
#   scripts/slurm-local.sh stop DIR    # stops slurmd and slurmctld (munged is left for other users)
#
# The node is this host under its short name, with every core; processes run as job steps with
# proctrack/pgid and no cgroups, so it works in containers (proctrack/linuxproc loses a step's
# children once their parent exits, and they can outlive the step). Accounting is off (squeue shows
# what runs; sacct needs slurmdbd).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
conf="$dir/slurm.conf"

stop() {
  for daemon in slurmd slurmctld; do
    if [[ -f "$dir/$daemon.pid" ]]; then
      pid=$(cat "$dir/$daemon.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/$daemon.pid"
    fi
  done
}

if [[ "$cmd" == stop ]]; then
  stop
  exit 0
fi
if [[ "$cmd" != start ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "slurm-local: needs root (slurmd runs job steps as their users)" >&2
  exit 1
fi
for program in munged slurmctld slurmd srun squeue; do
  if ! command -v "$program" >/dev/null; then
    echo "slurm-local: $program is missing; run scripts/install-deps.sh" >&2
    exit 1
  fi
done

# munge: one daemon per machine, shared; started once.
if ! munge -n </dev/null >/dev/null 2>&1; then
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
fi

# Two free ports for slurmctld and slurmd, below the ephemeral range.
free_port() {
  python3 - "$@" <<'PY'
import random, socket, sys
taken = set(int(p) for p in sys.argv[1:])
for _ in range(1000):
    port = random.randrange(20000, 30000)
    if port in taken:
        continue
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            print(port)
            break
        except OSError:
            pass
PY
}
stop
ctld_port=$(free_port)
slurmd_port=$(free_port "$ctld_port")
host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/state" "$dir/spool"
cat >"$conf" <<CONF
ClusterName=libra-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE OverSubscribe=FORCE State=UP
CONF
export SLURM_CONF="$conf"
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 300); do
  state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
  if [[ "$state" == idle* || "$state" == mix* ]]; then
    echo "SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-local: the node did not become idle (state '${state:-none}'); logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
