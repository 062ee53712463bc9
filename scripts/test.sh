#!/usr/bin/env bash
# Installs what libra needs (Debian packages), builds everything with warnings as errors, and
# runs every test (unit, golden and end-to-end) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLIBRA_WERROR=ON
cmake --build build -j2
# The Python workers' own tests (about 10 s).
(cd workers && /usr/bin/python3 -m unittest discover -s tests)
# The Slurm launcher's tests run against a one-node Slurm on this machine (root only; they are
# skipped without one).
if [[ "$(id -u)" -eq 0 ]] && command -v slurmctld >/dev/null; then
  slurm_dir="$PWD/build/slurm"
  if conf=$(scripts/slurm-local.sh start "$slurm_dir"); then
    export "${conf?}"
    trap 'scripts/slurm-local.sh stop "$slurm_dir"' EXIT
  else
    echo "test: the local Slurm did not start (see above); the Slurm tests are skipped"
  fi
fi
ctest --test-dir build --output-on-failure -j2
