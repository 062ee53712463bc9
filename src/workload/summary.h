// Workload summaries: the distribution of the trajectories a workload scripts, per policy version
// (turns, generated tokens, tool calls and their latency and outputs, truncation, success), for
// `libra workload` and for tests. Reads only the Workload interface; prints nothing.
#pragma once

#include <vector>

#include "workload/workload.h"

namespace libra::workload {

/// Quantiles of a set of values by nearest rank on the sorted values (the p-quantile is the
/// ceil(p * n)-th smallest); all zeros for an empty set.
struct Quantiles {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
  double mean = 0;
  bool operator==(const Quantiles&) const = default;
};

/// The quantiles of `values` (taken by value: it is sorted).
Quantiles QuantilesOf(std::vector<double> values);

/// The trajectories of one policy version.
struct VersionSummary {
  int version = 0;
  /// Per trajectory: turns, generated tokens, tool calls.
  Quantiles turns;
  Quantiles generated_tokens;
  Quantiles tool_calls;
  /// Per tool call: latency in seconds and tokens returned.
  Quantiles tool_latency_s;
  Quantiles tool_output_tokens;
  /// Fractions of trajectories: truncated by a limit; successful (reward >= 0.5).
  double truncated_fraction = 0;
  double success_fraction = 0;
  /// Fractions of tool calls that failed / timed out (0 when there are no calls).
  double tool_failure_fraction = 0;
  double tool_timeout_fraction = 0;
  bool operator==(const VersionSummary&) const = default;
};

/// One summary per entry of `versions` (in that order), each over the prompts x group_size
/// trajectories Script(p, s, version, skill) for p in [0, prompts) and s in [0, group_size).
/// REQUIRES: prompts >= 0, group_size >= 0.
std::vector<VersionSummary> Summarize(const Workload& w, int prompts, int group_size,
                                      const std::vector<int>& versions, double skill);

}  // namespace libra::workload
