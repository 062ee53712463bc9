#!/usr/bin/env bash
# Runs the whole test suite (ctest, as CI does) RUNS times while a parallel compile of libra keeps
# every core busy, and says how many runs passed: the tests must hold on a loaded machine, as
# they must in CI beside other builds (issue 24). The suite's build folder must be built first
# (scripts/test.sh, or cmake --build build).
#
#   scripts/stress-ci.sh            5 runs
#   scripts/stress-ci.sh 3          3 runs
#
# Environment: STRESS_BUILD (the suite's build folder, default build), STRESS_JOBS (compile jobs
# of the load, default twice the cores), CTEST_JOBS (default 2, as CI). LIBRA_TEST_TIME_SCALE
# (tests/support/test_util.h) is passed through when set; by default the tests get none: their
# deadlines are generous enough as they are. Logs: $STRESS_BUILD/stress/run-<k>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-5}"
build="${STRESS_BUILD:-build}"
jobs="${STRESS_JOBS:-$(( $(nproc) * 2 ))}"
ctest_jobs="${CTEST_JOBS:-2}"
[[ -d "${build}" ]] || { echo "stress-ci: ${build} is not built (run scripts/test.sh first)"; exit 2; }
mkdir -p "${build}/stress"
load_dir="$(mktemp -d)"
load_pid=""
cleanup() {
  if [[ -n "${load_pid}" ]]; then
    kill -- "-${load_pid}" 2>/dev/null || kill "${load_pid}" 2>/dev/null || true
    wait "${load_pid}" 2>/dev/null || true
  fi
  rm -rf "${load_dir}"
}
trap cleanup EXIT

# The load: libra compiled from scratch over and over, without ccache, in a group of its own.
set -m
(
  while true; do
    rm -rf "${load_dir}/b"
    CCACHE_DISABLE=1 cmake -S . -B "${load_dir}/b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DLIBRA_BUILD_TESTS=OFF > /dev/null 2>&1 || true
    CCACHE_DISABLE=1 cmake --build "${load_dir}/b" -j "${jobs}" > /dev/null 2>&1 || true
  done
) &
load_pid=$!
set +m
echo "stress-ci: load: libra compiling with ${jobs} jobs (pid ${load_pid}) on $(nproc) cores"

passed=0
for (( k = 1; k <= runs; k++ )); do
  log="${build}/stress/run-${k}.log"
  start=$(date +%s)
  if ctest --test-dir "${build}" -j "${ctest_jobs}" --output-on-failure > "${log}" 2>&1; then
    result="passed"
    passed=$(( passed + 1 ))
  else
    result="FAILED: $(grep -E '^\s+[0-9]+ - ' "${log}" | sed 's/^ *//' | tr '\n' ';')"
  fi
  summary=$(grep -E 'tests passed' "${log}" | tail -1)
  printf 'stress-ci: run %d/%d: %s in %d s (%s; load average %s)\n' "${k}" "${runs}" \
    "${result}" $(( $(date +%s) - start )) "${summary}" "$(cut -d' ' -f1 /proc/loadavg)"
done
echo "stress-ci: ${passed}/${runs} runs passed"
[[ ${passed} -eq ${runs} ]]
