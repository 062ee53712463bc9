#!/usr/bin/env bash
# Installs what libra needs (Debian packages), builds everything with warnings as errors, and
# runs every test (unit, golden and end-to-end) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLIBRA_WERROR=ON
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
