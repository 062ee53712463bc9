#!/usr/bin/env bash
# Installs what libra needs (Debian packages), builds everything with warnings as errors, and
# runs every test (unit, golden and end-to-end) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLIBRA_WERROR=ON
cmake --build build -j2
# The Slurm launcher's tests need a running Slurm: as root, a one-node Slurm is started on this
# machine (scripts/slurm-local.sh) and stopped after ctest. Where it cannot start (not root, or a
# machine whose daemons do not come up) the Slurm tests report themselves skipped and say why;
# LIBRA_TEST_SLURM=0 skips them on purpose (docs/cluster.md, "Slurm").
if [[ "${LIBRA_TEST_SLURM:-1}" == 1 ]]; then
  slurm_dir="$PWD/build/slurm"
  if [[ "$(id -u)" -eq 0 ]] && conf=$(timeout 180 scripts/slurm-local.sh start "$slurm_dir"); then
    export "${conf?}"
    trap 'scripts/slurm-local.sh stop "$slurm_dir"' EXIT
  else
    echo "test: the local Slurm did not start (needs root; see above); the Slurm tests are skipped"
  fi
else
  echo "test: Slurm launcher tests skipped (LIBRA_TEST_SLURM=0)"
fi
ctest --test-dir build --output-on-failure -j2
