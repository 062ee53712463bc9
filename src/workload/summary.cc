#include "workload/summary.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/check.h"

namespace libra::workload {
namespace {

// The ceil(p * n)-th smallest of sorted `values` (n > 0).
double NearestRank(const std::vector<double>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  const size_t rank = static_cast<size_t>(std::max(1.0, std::ceil(p * n - 1e-9)));
  return sorted[std::min(rank, sorted.size()) - 1];
}

double Fraction(int64_t part, int64_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

Quantiles QuantilesOf(std::vector<double> values) {
  Quantiles q;
  if (values.empty()) return q;
  std::sort(values.begin(), values.end());
  q.p50 = NearestRank(values, 0.50);
  q.p90 = NearestRank(values, 0.90);
  q.p99 = NearestRank(values, 0.99);
  q.max = values.back();
  double sum = 0;
  for (double v : values) sum += v;
  q.mean = sum / static_cast<double>(values.size());
  return q;
}

std::vector<VersionSummary> Summarize(const Workload& w, int prompts, int group_size,
                                      const std::vector<int>& versions, double skill) {
  LIBRA_CHECK(prompts >= 0 && group_size >= 0) << prompts << " x " << group_size;
  std::vector<VersionSummary> out;
  for (int version : versions) {
    std::vector<double> turns, generated, calls, latency, output;
    int64_t trajectories = 0, truncated = 0, successes = 0, failures = 0, timeouts = 0;
    for (int p = 0; p < prompts; ++p) {
      for (int s = 0; s < group_size; ++s) {
        const TrajectoryScript script = w.Script(p, s, version, skill);
        ++trajectories;
        if (script.truncated()) ++truncated;
        if (script.reward >= 0.5) ++successes;
        int64_t tool_calls = 0;
        for (const TurnScript& t : script.turns) {
          if (t.end != TurnEnd::kToolCall) continue;
          ++tool_calls;
          latency.push_back(t.tool_latency_s);
          output.push_back(static_cast<double>(t.tool_output_tokens));
          if (t.tool_status == ToolStatus::kFailure) ++failures;
          if (t.tool_status == ToolStatus::kTimeout) ++timeouts;
        }
        turns.push_back(static_cast<double>(script.turns.size()));
        generated.push_back(static_cast<double>(script.generated_tokens()));
        calls.push_back(static_cast<double>(tool_calls));
      }
    }
    VersionSummary v;
    v.version = version;
    v.turns = QuantilesOf(std::move(turns));
    v.generated_tokens = QuantilesOf(std::move(generated));
    v.tool_calls = QuantilesOf(std::move(calls));
    const int64_t call_count = static_cast<int64_t>(latency.size());
    v.tool_latency_s = QuantilesOf(std::move(latency));
    v.tool_output_tokens = QuantilesOf(std::move(output));
    v.truncated_fraction = Fraction(truncated, trajectories);
    v.success_fraction = Fraction(successes, trajectories);
    v.tool_failure_fraction = Fraction(failures, call_count);
    v.tool_timeout_fraction = Fraction(timeouts, call_count);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace libra::workload
