#!/usr/bin/env bash
# Fuzzes libra's input readers with libFuzzer (Debian's clang) under AddressSanitizer and
# UndefinedBehaviorSanitizer: the recipe parser and validator, --set values, the trace reader,
# the JSON reader, the engine and trainer reply parsers, and the probe / calibration readers
# (fuzz/*_fuzz.cc; docs/benchmarks.md#fuzzing).
#
#   scripts/fuzz.sh                 every harness, FUZZ_RUNS executions each (default 1,000,000)
#   scripts/fuzz.sh json trace      only these
#   scripts/fuzz.sh --merge json    fold what fuzzing found into fuzz/corpus/<harness>, minimised
#                                   (commit it: CI replays the corpus)
#
# Environment: FUZZ_RUNS (executions per harness), FUZZ_BUILD (build folder, default
# build-fuzz), FUZZ_NICE (default 19: the fuzzers yield to everything else on the machine).
# A hang longer than 1 s, an allocation over 2 GB, a crash or a sanitizer report stops the
# harness; its input is saved in $FUZZ_BUILD/artifacts/<harness>/ and the script exits with 1.
# The summary line per harness gives executions, seconds, executions per second, corpus size
# and coverage; paste it into docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(recipe set trace json engine_reply trainer_reply probe)
build="${FUZZ_BUILD:-build-fuzz}"
runs="${FUZZ_RUNS:-1000000}"
nice_level="${FUZZ_NICE:-19}"
merge=0
harnesses=()
for arg in "$@"; do
  case "${arg}" in
    --merge) merge=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) harnesses+=("${arg}") ;;
  esac
done
[[ ${#harnesses[@]} -eq 0 ]] && harnesses=("${all[@]}")

cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DLIBRA_FUZZ=ON -DLIBRA_SANITIZE="address;undefined" \
  -DLIBRA_BUILD_TESTS=OFF > "${build}.cmake.log" 2>&1 || { cat "${build}.cmake.log"; exit 1; }
targets=()
for h in "${harnesses[@]}"; do targets+=("libra_fuzz_${h}"); done
nice -n "${nice_level}" cmake --build "${build}" -j2 --target "${targets[@]}"

# Seeds besides fuzz/corpus/<harness>: what each reader meets in real use.
seeds() {
  case "$1" in
    recipe) echo recipes recipes/paper ;;
    json | probe) echo tests/testdata/probes ;;
  esac
}

export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
status=0
summary=()
for h in "${harnesses[@]}"; do
  fuzzer="${build}/fuzz/libra_fuzz_${h}"
  found="${build}/found/${h}"
  artifacts="${build}/artifacts/${h}/"
  mkdir -p "${found}" "${artifacts}" "fuzz/corpus/${h}"
  if [[ ${merge} -eq 1 ]]; then
    nice -n "${nice_level}" "${fuzzer}" -merge=1 "fuzz/corpus/${h}" "${found}"
    continue
  fi
  log="${build}/fuzz-${h}.log"
  start=$(date +%s)
  # shellcheck disable=SC2046
  if nice -n "${nice_level}" "${fuzzer}" -runs="${runs}" -timeout=1 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix="${artifacts}" \
      "${found}" "fuzz/corpus/${h}" $(seeds "${h}") > "${log}" 2>&1; then
    result="ok"
  else
    result="FAILED (see ${log} and ${artifacts})"
    status=1
  fi
  seconds=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "${log}" | tail -1 | cut -d' ' -f2 || true)
  corpus=$(grep -o 'corp: [0-9]*' "${log}" | tail -1 | cut -d' ' -f2 || true)
  rate=$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))
  summary+=("$(printf '%-14s %10s execs %7s s %7s/s  corpus %5s  cov %6s  %s' "${h}" \
    "${execs:-?}" "${seconds}" "${rate}" "${corpus:-?}" "${cov:-?}" "${result}")")
  echo "${summary[-1]}"
done
if [[ ${merge} -eq 0 ]]; then
  echo
  echo "fuzzing summary (FUZZ_RUNS=${runs}, $(clang++ --version | head -1)):"
  printf '%s\n' "${summary[@]}"
fi
exit "${status}"
