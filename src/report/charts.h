// Charts: libra's own small SVG writer (no plotting dependency) and the plots `libra report
// --plots` draws from the run database: reward and throughput per system over time, the
// step-time breakdown, GPU allocation over time and trajectory lengths over steps.
//
// Every chart is a standalone SVG document with a title, a subtitle, labelled axes with units,
// "nice" ticks (1, 2 or 5 x 10^k) and a legend. Output is deterministic (fixed palette, numbers
// with at most 3 significant decimals) so that it can be golden-tested. A chart without data says
// "no data" instead of drawing an empty frame.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/summary.h"
#include "store/records.h"

namespace libra::report {

/// Text with &, <, >, " and ' escaped for XML text and attribute values.
std::string XmlEscape(std::string_view text);

/// Tick values covering [lo, hi]: about `target` of them, at multiples of 1, 2 or 5 x 10^k, the
/// first <= lo and the last >= hi. REQUIRES: lo <= hi, target >= 2.
std::vector<double> NiceTicks(double lo, double hi, int target);

/// A number for an axis label: no trailing zeros, no "-0", at most 3 decimals; 12000 -> "12k",
/// 1.5e6 -> "1.5M".
std::string AxisNumber(double value);

/// One line: (x, y) points in x order.
struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;
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
};

/// Stacked bars: one bar per label, one segment per part.
struct StackedBars {
  std::string title;
  std::string subtitle;
  std::string y_label;
  std::vector<std::string> parts;
  std::vector<std::string> labels;
  std::vector<std::vector<double>> values;  // [bar][part]
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
std::string RenderStackedBars(const StackedBars& chart);
std::string RenderStackedSteps(const StackedSteps& chart);

/// A run with what its plots need beyond its steps.
struct PlotRun {
  RunView view;
  std::vector<store::TrajectoryRecord> trajectories;
  std::vector<store::DecisionRecord> decisions;
};

struct PlotFile {
  std::string name;  // "reward.svg", "allocation-run3.svg", ...
  std::string svg;
};

/// Every plot of `runs`: reward.svg, throughput.svg and breakdown.svg over all runs, and
/// allocation-run<id>.svg and lengths-run<id>.svg for each run. Rewards of simulated runs are
/// labelled "modelled".
std::vector<PlotFile> BuildPlots(const std::vector<PlotRun>& runs);

/// The rollout GPUs of a layout string ("train 8 (...) | rollout tp1x4+tp4x2") by TP size, as
/// (tp, gpus) pairs in TP order; empty when the text has no rollout part.
std::vector<std::pair<int, int>> RolloutGpusByTp(const std::string& layout);

}  // namespace libra::report
