#!/usr/bin/env bash
# Installs what libra needs (Debian packages), builds it (Release) and runs the main job on the
# simulator: `libra compare recipes/quickstart.toml`, which prints Libra's system and the
# baselines side by side and records them in results/libra.db.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBRA_BUILD_TESTS=OFF
cmake --build build-release -j2
./build-release/libra compare recipes/quickstart.toml
