#!/usr/bin/env bash
# Renders the plots that docs/reports.md shows: the paper recipe's comparison (seed 1), plotted by
# `libra report --plots` and rendered to PNG with rsvg-convert (librsvg2-bin) into
# docs/img/r2e-gym/, per-run plots named after their system. Run from the repository root after
# a build: scripts/render-doc-plots.sh [path/to/libra]
set -euo pipefail
libra=${1:-build/libra}
out=docs/img/r2e-gym
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$libra" compare -q --db "$tmp/paper.db" \
  --systems disagg-16-32,verl-sync,areal-async,libra,verl-dynamic \
  recipes/paper/r2e-gym-qwen3-14b.toml
"$libra" report --db "$tmp/paper.db" --plots "$tmp/plots" > /dev/null
mkdir -p "$out"
rm -f "$out"/*.svg "$out"/*.png
# run id -> system, for the per-run plots' names.
declare -A system
while IFS=, read -r run name sys _; do
  [ "$run" = run ] || system[$run]=$sys
done < <("$libra" report --db "$tmp/paper.db" --list --format csv)
for svg in "$tmp"/plots/*.svg; do
  name=$(basename "${svg%.svg}")
  if [[ $name =~ ^(allocation|lengths)-run([0-9]+)$ ]]; then
    name="${BASH_REMATCH[1]}-${system[${BASH_REMATCH[2]}]}"
  fi
  rsvg-convert "$svg" -o "$out/$name.png"
done
ls "$out"
