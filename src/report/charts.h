// Charts: libra's own small SVG writer (no plotting dependency) and the plots `libra report
// --plots` draws from the run database.
//
// Every chart is a standalone SVG document with a title, a subtitle, labelled axes with units,
// "nice" ticks (1, 2 or 5 x 10^k) inside the data's range (an axis ends with the data) and a
// legend sized to its labels. Layout is computed from estimated text widths (DejaVu Sans metrics,
// wider than Helvetica or Arial, so the estimate errs on the roomy side); tests render every plot
// with librsvg and check that no text leaves the canvas or overlaps other text. Output is
// deterministic (fixed palette, numbers with at most 2 decimals) so that it can be golden-tested.
// A chart without data says "no data" instead of drawing an empty frame.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "records/records.h"
#include "report/summary.h"

namespace libra::report {

/// Text with &, <, >, " and ' escaped for XML text and attribute values.
std::string XmlEscape(std::string_view text);

/// Tick values covering [lo, hi]: about `target` of them, at multiples of 1, 2 or 5 x 10^k, the
/// first <= lo and the last >= hi. REQUIRES: lo <= hi, target >= 2.
std::vector<double> NiceTicks(double lo, double hi, int target);

/// A number for an axis label: no trailing zeros, no "-0", at most 3 decimals; 12000 -> "12k",
/// 1.5e6 -> "1.5M".
std::string AxisNumber(double value);

/// The estimated width in pixels of `text` at `size` px (bold a tenth wider).
double TextWidth(std::string_view text, double size, bool bold = false);

/// A band's edges at x: (x, low, high).
struct BandPoint {
  double x = 0;
  double low = 0;
  double high = 0;
};

/// One line: (x, y) points in x order, optionally inside a band (the spread over seeds), drawn
/// faint in the line's colour.
struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;
  std::vector<BandPoint> band{};
};

struct LineChart {
  std::string title;
  std::string subtitle;
  std::string x_label;  // with the unit, e.g. "wall-clock (s)"
  std::string y_label;
  std::vector<Series> series;
  /// Draw the y axis from 0 (rates, counts) rather than from the data's minimum.
  bool y_from_zero = true;
  /// x is a count (steps): ticks at whole numbers.
  bool x_integers = false;
  /// Draw each series as a trailing moving mean over this many points, with the points
  /// themselves as a faint line behind it (1: the points alone).
  int smooth = 1;
};

/// More series than this are drawn as small multiples: one panel per series, the others grey.
inline constexpr size_t kMaxOverlaidSeries = 4;

/// Horizontal bars on a shared x axis: one row per label, each with one or more lanes (thin bars
/// stacked under each other), each lane a set of spans coloured by part. Spans may start before
/// 0 (drawn over a shaded band) and may overlap across lanes: that is what lanes are for.
struct HorizontalBars {
  struct Span {
    double from = 0;
    double to = 0;
    size_t part = 0;
  };
  struct Row {
    std::string label;
    /// Lanes of spans, top to bottom; the first lane is drawn thicker.
    std::vector<std::vector<Span>> lanes;
    /// Drawn right of the bars ("12.3 GPU-s"); or, with no lanes, in their place.
    std::string note;
  };
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::vector<std::string> parts;
  std::vector<Row> rows;
  /// The label of the shaded band left of 0, when spans reach there.
  std::string before_zero;
};

/// Stacked areas over x, drawn as steps: part p holds values[i][p] from x[i] to x[i + 1].
struct StackedSteps {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> parts;
  std::vector<double> x;                    // one more than values
  std::vector<std::vector<double>> values;  // [interval][part]
};

std::string RenderLineChart(const LineChart& chart);
std::string RenderHorizontalBars(const HorizontalBars& chart);
std::string RenderStackedSteps(const StackedSteps& chart);

/// A run with what its plots need beyond its steps.
struct PlotRun {
  RunView view;
  std::vector<records::TrajectoryRecord> trajectories;
  std::vector<records::DecisionRecord> decisions;
  std::vector<records::EventRecord> events;
};

struct PlotFile {
  std::string name;  // "reward.svg", "allocation-run3.svg", ...
  std::string svg;
};

/// Every plot of `runs`: eval.svg, time-to-target.svg (targets as `convergence` says),
/// reward.svg, throughput.svg, breakdown.svg and gpu-seconds.svg over all runs, and
/// allocation-run<id>.svg and lengths-run<id>.svg for each run. Scores and rewards of simulated
/// runs are labelled "modelled".
std::vector<PlotFile> BuildPlots(const std::vector<PlotRun>& runs,
                                 const Convergence& convergence = {});

/// The evaluation score over wall-clock of each system (its runs are its seeds): with one run,
/// its evaluations; with several, their mean, each seed's curve interpolated between its
/// evaluations up to the end of the shortest, with the range over seeds as the band.
LineChart EvalChart(const std::vector<PlotRun>& runs);

/// Per system, when its runs first reached their seed's evaluation target (EvalTargets): a bar
/// to the mean over the seeds that reached it, under it the range over those seeds, and a note
/// saying how many seeds reached it.
HorizontalBars TimeToTargetChart(const std::vector<PlotRun>& runs, const Convergence& convergence);

/// The rollout GPUs of a layout string ("train 8 (...) | rollout tp1x4+tp4x2") by TP size, as
/// (tp, gpus) pairs in TP order; empty when the text has no rollout part.
std::vector<std::pair<int, int>> RolloutGpusByTp(const std::string& layout);

/// One run's row of the step-time breakdown (breakdown.svg): the trainer's mean step as spans
/// of waiting (part 1), training (2), weight sync (3) and anything else (4), from the step's
/// start; under it, the mean rollout of a step's batch (part 0) from its first trajectory's start
/// to its last one's end, relative to the step's start: it overlaps the wait in a synchronous
/// run and reaches back into earlier steps in an asynchronous one. Phases that overlap are drawn
/// as overlap, never stacked.
HorizontalBars::Row BreakdownRow(const PlotRun& run);

/// Where a run's GPU-seconds went (all GPUs of the cluster over the run): generating, training,
/// switching (the trainer's side of weight syncs, and GPUs changing role in layout changes) and
/// idle (waiting for work, bubbles, GPUs no layout used). Generating is unknown (and so is idle)
/// when the backend did not record GPU utilisation.
struct GpuSeconds {
  double total = 0;
  double training = 0;
  double switching = 0;
  std::optional<double> rollout;
  std::optional<double> idle;
  int64_t trajectories = 0;
};
GpuSeconds AccountGpuSeconds(const RunView& view, const std::vector<records::EventRecord>& events);

/// The layout over time of one run, from its initial plan and its layout changes (relayout
/// events, including the lends and reclaims of an elastic pool), and for a colocated run its
/// train and sync spans: contiguous intervals with GPUs per part ("training", "rollout TP<n>",
/// "switching").
StackedSteps AllocationOverTime(const PlotRun& run);

}  // namespace libra::report
