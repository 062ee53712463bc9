// Per-step metrics of a run under the names users of verl know (timing_s/gen, perf/throughput,
// ...), for `libra export`: so that libra's runs can sit beside verl or AReaL runs in TensorBoard
// or a dashboard. A name of verl's is used only where libra measures the same thing; everything
// else is under libra/. docs/reports.md lists the mapping, with the token counting spelled out
// (verl's perf/throughput counts prompt and response tokens, libra's "gen tok/s/GPU" generated
// tokens only).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "records/records.h"
#include "report/summary.h"

namespace libra::report {

struct MetricDef {
  std::string name;  // "timing_s/gen"
  std::string unit;
  /// What it is, in libra's terms (docs/reports.md repeats it).
  std::string meaning;
};

/// Every exported metric, in column order.
const std::vector<MetricDef>& ExportedMetrics();

/// One step's metrics, aligned with ExportedMetrics(); missing where the run did not record
/// what a metric needs.
struct StepMetrics {
  int step = 0;
  double end_s = 0;
  std::vector<std::optional<double>> values;
};

/// The metrics of every step of `view`; `trajectories` and `turns` are the run's (they give the
/// token counts of whole sequences and the stale trajectories).
std::vector<StepMetrics> MetricsPerStep(const RunView& view,
                                        const std::vector<records::TrajectoryRecord>& trajectories,
                                        const std::vector<records::TurnRecord>& turns);

/// Seconds since the Unix epoch of an ISO 8601 UTC time "2026-12-02T15:04:05Z"; nullopt when it
/// is not one.
std::optional<double> EpochSeconds(const std::string& iso8601);

}  // namespace libra::report
