#include "report/charts.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <regex>

#include "common/strings.h"

namespace libra::report {
namespace {

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// Canvas and plot area, in SVG user units.
constexpr double kWidth = 760;
constexpr double kHeight = 440;
constexpr double kLeft = 76;
constexpr double kRight = 190;  // legend column
constexpr double kTop = 62;
constexpr double kBottom = 58;
constexpr double kPlotW = kWidth - kLeft - kRight;
constexpr double kPlotH = kHeight - kTop - kBottom;

/// Coordinates: at most 2 decimals, no "-0".
std::string Num(double v) {
  std::string s = StrFormat("%.2f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

const char* Colour(size_t i) { return kPalette[i % kPaletteSize]; }

/// A document under construction: header, title block, then whatever the chart adds.
class Svg {
 public:
  Svg(const std::string& title, const std::string& subtitle) {
    out_ += StrFormat(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s "
        "%s\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
        "<title>%s</title>\n"
        "<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n",
        Num(kWidth).c_str(), Num(kHeight).c_str(), Num(kWidth).c_str(), Num(kHeight).c_str(),
        XmlEscape(title).c_str(), Num(kWidth).c_str(), Num(kHeight).c_str());
    Text(kLeft, 24, title, "start", "font-size=\"16\" font-weight=\"bold\"");
    if (!subtitle.empty()) Text(kLeft, 42, subtitle, "start", "fill=\"#555555\"");
  }

  void Text(double x, double y, const std::string& text, const char* anchor,
            const std::string& extra = "") {
    out_ += StrFormat("<text x=\"%s\" y=\"%s\" text-anchor=\"%s\"%s%s>%s</text>\n", Num(x).c_str(),
                      Num(y).c_str(), anchor, extra.empty() ? "" : " ", extra.c_str(),
                      XmlEscape(text).c_str());
  }
  void Line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1) {
    out_ += StrFormat(
        "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"%s\"/>\n",
        Num(x1).c_str(), Num(y1).c_str(), Num(x2).c_str(), Num(y2).c_str(), stroke,
        Num(width).c_str());
  }
  void Rect(double x, double y, double w, double h, const char* fill) {
    out_ += StrFormat("<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\"/>\n",
                      Num(x).c_str(), Num(y).c_str(), Num(std::max(0.0, w)).c_str(),
                      Num(std::max(0.0, h)).c_str(), fill);
  }
  void Polyline(const std::vector<std::pair<double, double>>& points, const char* stroke) {
    std::vector<std::string> xy;
    for (const auto& [x, y] : points) xy.push_back(Num(x) + "," + Num(y));
    out_ += StrFormat(
        "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
        "stroke-linejoin=\"round\"/>\n",
        StrJoin(xy, " ").c_str(), stroke);
  }
  void Polygon(const std::vector<std::pair<double, double>>& points, const char* fill) {
    std::vector<std::string> xy;
    for (const auto& [x, y] : points) xy.push_back(Num(x) + "," + Num(y));
    // Stroked in its own colour, so that adjacent polygons show no seam.
    out_ += StrFormat("<polygon points=\"%s\" fill=\"%s\" stroke=\"%s\" stroke-width=\"0.5\"/>\n",
                      StrJoin(xy, " ").c_str(), fill, fill);
  }
  void Circle(double x, double y, const char* fill) {
    out_ += StrFormat("<circle cx=\"%s\" cy=\"%s\" r=\"2.5\" fill=\"%s\"/>\n", Num(x).c_str(),
                      Num(y).c_str(), fill);
  }
  void Legend(const std::vector<std::string>& labels, bool swatches) {
    const double x = kLeft + kPlotW + 16;
    for (size_t i = 0; i < labels.size(); ++i) {
      const double y = kTop + 8 + 20 * static_cast<double>(i);
      if (swatches) {
        Rect(x, y - 9, 14, 10, Colour(i));
      } else {
        Line(x, y - 4, x + 14, y - 4, Colour(i), 2.5);
      }
      Text(x + 20, y, labels[i], "start");
    }
  }
  void NoData() {
    Text(kLeft + kPlotW / 2, kTop + kPlotH / 2, "no data", "middle", "fill=\"#888888\"");
  }
  std::string Finish() { return out_ + "</svg>\n"; }

 private:
  std::string out_;
};

/// A linear axis mapping [ticks.front(), ticks.back()] onto [from, to] pixels.
struct Axis {
  std::vector<double> ticks;
  double from = 0;
  double to = 1;
  double Map(double v) const {
    const double lo = ticks.front();
    const double hi = ticks.back();
    return hi > lo ? from + (v - lo) / (hi - lo) * (to - from) : (from + to) / 2;
  }
};

Axis MakeAxis(double lo, double hi, double from, double to, bool integers = false) {
  // Numbers no axis can span (a damaged database's inf) leave a plain axis instead.
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo)) {
    lo = 0;
    hi = 1;
  }
  if (!(hi > lo)) {
    lo = lo - 1;
    hi = hi + 1;
  }
  std::vector<double> ticks = NiceTicks(lo, hi, 6);
  if (integers && ticks.size() > 1 && ticks[1] - ticks[0] < 1) {
    ticks.clear();
    for (double t = std::floor(lo); t < hi + 1; ++t) ticks.push_back(t);
  }
  if (ticks.empty()) ticks = {lo, hi};
  return Axis{std::move(ticks), from, to};
}

/// Frame, grid, tick labels and axis titles.
void DrawAxes(Svg& svg, const Axis& x, const Axis& y, const std::string& x_label,
              const std::string& y_label, const std::vector<std::string>* x_names = nullptr) {
  for (double t : y.ticks) {
    const double py = y.Map(t);
    svg.Line(kLeft, py, kLeft + kPlotW, py, "#e5e5e5");
    svg.Text(kLeft - 8, py + 4, AxisNumber(t), "end");
  }
  if (x_names == nullptr) {
    for (double t : x.ticks) {
      const double px = x.Map(t);
      svg.Line(px, kTop + kPlotH, px, kTop + kPlotH + 5, "#333333");
      svg.Text(px, kTop + kPlotH + 19, AxisNumber(t), "middle");
    }
  }
  svg.Line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "#333333");
  svg.Line(kLeft, kTop, kLeft, kTop + kPlotH, "#333333");
  svg.Text(kLeft + kPlotW / 2, kHeight - 14, x_label, "middle");
  svg.Text(18, kTop + kPlotH / 2, y_label, "middle",
           StrFormat("transform=\"rotate(-90 18 %s)\"", Num(kTop + kPlotH / 2).c_str()));
}

/// Percentile (nearest rank) of sorted values.
double Percentile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

bool AnySimulated(const std::vector<PlotRun>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [](const PlotRun& r) { return r.view.run.backend == "sim"; });
}

std::string RunLabel(const store::RunInfo& run) {
  return StrFormat("%s (run %lld)", run.system.c_str(), static_cast<long long>(run.id));
}

std::string Names(const std::vector<PlotRun>& runs) {
  std::vector<std::string> names;
  for (const PlotRun& r : runs) names.push_back(r.view.run.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return StrJoin(names, ", ");
}

std::string AllocationPlot(const PlotRun& run) {
  // The layout in force during each step: the last applied decision before the step ended.
  std::vector<const store::DecisionRecord*> applied;
  for (const store::DecisionRecord& d : run.decisions) {
    if (d.applied) applied.push_back(&d);
  }
  std::map<int, size_t> tp_part;  // TP size -> part index
  std::vector<std::vector<std::pair<int, int>>> rollout;
  std::vector<bool> colocated;
  for (const store::StepRecord& s : run.view.steps) {
    const store::DecisionRecord* in_force = nullptr;
    for (const store::DecisionRecord* d : applied) {
      if (d->at_s <= s.start_s + 1e-9) in_force = d;
    }
    std::vector<std::pair<int, int>> by_tp;
    if (in_force != nullptr) by_tp = RolloutGpusByTp(in_force->layout);
    int sum = 0;
    for (const auto& [tp, gpus] : by_tp) sum += gpus;
    if (sum != s.rollout_gpus) by_tp = {{0, s.rollout_gpus}};  // unknown TP mix
    for (const auto& [tp, gpus] : by_tp) tp_part.emplace(tp, 0);
    rollout.push_back(by_tp);
    colocated.push_back(in_force != nullptr &&
                        in_force->layout.find("(colocated)") != std::string::npos);
  }
  StackedSteps chart;
  chart.title = "GPU allocation over time";
  chart.subtitle = RunLabel(run.view.run) + ": training, rollout by TP size, hybrid (colocated)";
  chart.x_label = "wall-clock (s)";
  chart.y_label = "GPUs";
  chart.parts.push_back("training");
  for (auto& [tp, index] : tp_part) {
    index = chart.parts.size();
    chart.parts.push_back(tp == 0 ? "rollout" : StrFormat("rollout TP%d", tp));
  }
  const size_t hybrid = chart.parts.size();
  chart.parts.push_back("hybrid (colocated)");
  for (size_t i = 0; i < run.view.steps.size(); ++i) {
    const store::StepRecord& s = run.view.steps[i];
    if (chart.x.empty()) chart.x.push_back(s.start_s);
    chart.x.push_back(s.end_s);
    std::vector<double> v(chart.parts.size(), 0);
    if (colocated[i]) {
      v[hybrid] = s.train_gpus;
    } else {
      v[0] = s.train_gpus;
      for (const auto& [tp, gpus] : rollout[i]) v[tp_part.at(tp)] = gpus;
    }
    chart.values.push_back(std::move(v));
  }
  return RenderStackedSteps(chart);
}

std::string LengthsPlot(const PlotRun& run) {
  std::map<int, std::vector<double>> by_step;
  for (const store::TrajectoryRecord& t : run.trajectories) {
    by_step[t.step].push_back(static_cast<double>(t.generated_tokens));
  }
  LineChart chart;
  chart.title = "Trajectory length over steps";
  chart.subtitle = RunLabel(run.view.run) + ": generated tokens per trajectory, p10 / p50 / p90";
  chart.x_label = "step";
  chart.x_integers = true;
  chart.y_label = "generated tokens";
  chart.series = {{"p90", {}}, {"p50 (median)", {}}, {"p10", {}}};
  for (auto& [step, lengths] : by_step) {
    std::sort(lengths.begin(), lengths.end());
    chart.series[0].points.emplace_back(step, Percentile(lengths, 0.9));
    chart.series[1].points.emplace_back(step, Percentile(lengths, 0.5));
    chart.series[2].points.emplace_back(step, Percentile(lengths, 0.1));
  }
  return RenderLineChart(chart);
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  const double span = hi - lo;
  if (!(span > 0) || !std::isfinite(span)) return {lo};
  const double raw = span / std::max(1, target - 1);
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step + 1e-9) * step;
  // Counted rather than summed: where a step is below the numbers' precision, t += step would
  // never move.
  for (int k = 0; k <= 2 * std::max(1, target) + 2; ++k) {
    const double t = first + k * step;
    if (!(t < hi + step - 1e-9 * step)) break;
    ticks.push_back(std::abs(t) < 1e-12 * step ? 0 : t);
    if (t >= hi - 1e-9 * step) break;
  }
  if (ticks.empty()) ticks.push_back(lo);
  return ticks;
}

std::string AxisNumber(double value) {
  const double a = std::abs(value);
  std::string suffix;
  if (a >= 1e6) {
    value /= 1e6;
    suffix = "M";
  } else if (a >= 1e4) {
    value /= 1e3;
    suffix = "k";
  }
  std::string s = StrFormat("%.3f", value);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s + suffix;
}

std::string RenderLineChart(const LineChart& chart) {
  Svg svg(chart.title, chart.subtitle);
  std::optional<double> x_lo, x_hi, y_lo, y_hi;
  for (const Series& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo.value_or(x), x);
      x_hi = std::max(x_hi.value_or(x), x);
      y_lo = std::min(y_lo.value_or(y), y);
      y_hi = std::max(y_hi.value_or(y), y);
    }
  }
  if (!x_lo) {
    svg.NoData();
    return svg.Finish();
  }
  if (chart.y_from_zero) y_lo = std::min(0.0, *y_lo);
  const Axis x = MakeAxis(*x_lo, *x_hi, kLeft, kLeft + kPlotW, chart.x_integers);
  const Axis y = MakeAxis(*y_lo, *y_hi, kTop + kPlotH, kTop);
  DrawAxes(svg, x, y, chart.x_label, chart.y_label);
  std::vector<std::string> labels;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    std::vector<std::pair<double, double>> points;
    for (const auto& [px, py] : chart.series[i].points) {
      if (std::isfinite(px) && std::isfinite(py)) points.emplace_back(x.Map(px), y.Map(py));
    }
    if (points.size() == 1) svg.Circle(points[0].first, points[0].second, Colour(i));
    if (points.size() > 1) svg.Polyline(points, Colour(i));
    labels.push_back(chart.series[i].label);
  }
  svg.Legend(labels, false);
  return svg.Finish();
}

std::string RenderStackedBars(const StackedBars& chart) {
  Svg svg(chart.title, chart.subtitle);
  double top = 0;
  for (const std::vector<double>& bar : chart.values) {
    double sum = 0;
    for (double v : bar) sum += std::isfinite(v) ? std::max(0.0, v) : 0;
    top = std::max(top, sum);
  }
  if (chart.labels.empty() || !(top > 0)) {
    svg.NoData();
    return svg.Finish();
  }
  const Axis y = MakeAxis(0, top, kTop + kPlotH, kTop);
  DrawAxes(svg, Axis{{0, 1}, kLeft, kLeft + kPlotW}, y, "", chart.y_label, &chart.labels);
  const double slot = kPlotW / static_cast<double>(chart.labels.size());
  const double width = std::min(80.0, slot * 0.6);
  for (size_t b = 0; b < chart.labels.size(); ++b) {
    const double cx = kLeft + slot * (static_cast<double>(b) + 0.5);
    double base = 0;
    for (size_t p = 0; p < chart.parts.size() && p < chart.values[b].size(); ++p) {
      const double v = std::isfinite(chart.values[b][p]) ? std::max(0.0, chart.values[b][p]) : 0;
      svg.Rect(cx - width / 2, y.Map(base + v), width, y.Map(base) - y.Map(base + v), Colour(p));
      base += v;
    }
    svg.Text(cx, kTop + kPlotH + 19, chart.labels[b], "middle");
  }
  svg.Legend(chart.parts, true);
  return svg.Finish();
}

std::string RenderStackedSteps(const StackedSteps& chart) {
  Svg svg(chart.title, chart.subtitle);
  double top = 0;
  for (const std::vector<double>& v : chart.values) {
    double sum = 0;
    for (double x : v) sum += std::max(0.0, x);
    top = std::max(top, sum);
  }
  if (chart.values.empty() || chart.x.size() != chart.values.size() + 1 || !(top > 0)) {
    svg.NoData();
    return svg.Finish();
  }
  const Axis x = MakeAxis(chart.x.front(), chart.x.back(), kLeft, kLeft + kPlotW);
  const Axis y = MakeAxis(0, top, kTop + kPlotH, kTop);
  DrawAxes(svg, x, y, chart.x_label, chart.y_label);
  std::vector<double> base(chart.values.size(), 0);
  std::vector<std::string> shown;
  for (size_t p = 0; p < chart.parts.size(); ++p) {
    bool any = false;
    for (const std::vector<double>& v : chart.values) any = any || v[p] > 0;
    if (!any) continue;
    for (size_t i = 0; i < chart.values.size(); ++i) {
      const double v = std::max(0.0, chart.values[i][p]);
      if (v <= 0) continue;
      const double x0 = x.Map(chart.x[i]);
      const double x1 = x.Map(chart.x[i + 1]);
      svg.Polygon({{x0, y.Map(base[i])},
                   {x1, y.Map(base[i])},
                   {x1, y.Map(base[i] + v)},
                   {x0, y.Map(base[i] + v)}},
                  Colour(shown.size()));
      base[i] += v;
    }
    shown.push_back(chart.parts[p]);
  }
  svg.Legend(shown, true);
  return svg.Finish();
}

std::vector<std::pair<int, int>> RolloutGpusByTp(const std::string& layout) {
  const size_t at = layout.find("rollout ");
  if (at == std::string::npos) return {};
  static const std::regex kPart(R"(tp(\d+)x(\d+))");
  // Sizes beyond any cluster (a damaged database) make the mix unknown.
  constexpr int64_t kMost = 1 << 20;
  std::map<int, int64_t> gpus;
  int64_t total = 0;
  const std::string rest = layout.substr(at);
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), kPart);
       it != std::sregex_iterator(); ++it) {
    int64_t tp = 0;
    int64_t count = 0;
    const std::string tp_text = (*it)[1].str();
    const std::string count_text = (*it)[2].str();
    if (std::from_chars(tp_text.data(), tp_text.data() + tp_text.size(), tp).ec != std::errc() ||
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count).ec !=
            std::errc() ||
        tp > kMost || count > kMost || (total += tp * count) > kMost) {
      return {};
    }
    gpus[static_cast<int>(tp)] += tp * count;
  }
  std::vector<std::pair<int, int>> out;
  for (const auto& [tp, n] : gpus) out.emplace_back(tp, static_cast<int>(n));
  return out;
}

std::vector<PlotFile> BuildPlots(const std::vector<PlotRun>& runs) {
  const std::string names = Names(runs);
  std::vector<PlotFile> files;

  LineChart reward;
  reward.title =
      AnySimulated(runs) ? "Reward over wall-clock (modelled)" : "Reward over wall-clock";
  reward.subtitle = names + ": mean reward of each step's batch" +
                    (AnySimulated(runs) ? "; simulated runs draw it from the skill model" : "");
  reward.x_label = "wall-clock (s)";
  reward.y_label = "mean reward";
  LineChart throughput;
  throughput.title = "Throughput per step";
  throughput.subtitle = names + ": trajectories trained per second of each step";
  throughput.x_label = "step";
  throughput.x_integers = true;
  throughput.y_label = "trajectories / s";
  StackedBars breakdown;
  breakdown.title = "Step-time breakdown";
  breakdown.subtitle = names + ": mean seconds per step; asynchronous rollout overlaps training";
  breakdown.y_label = "seconds per step";
  breakdown.parts = {"rollout", "train", "sync", "trainer wait"};
  for (const PlotRun& run : runs) {
    Series r{RunLabel(run.view.run), {}};
    Series t{RunLabel(run.view.run), {}};
    for (const store::StepRecord& s : run.view.steps) {
      r.points.emplace_back(s.end_s, s.reward_mean);
      if (s.end_s > s.start_s)
        t.points.emplace_back(s.step, s.trajectories / (s.end_s - s.start_s));
    }
    reward.series.push_back(std::move(r));
    throughput.series.push_back(std::move(t));
    const RunMetrics m = ComputeMetrics(run.view);
    breakdown.labels.push_back(StrFormat("%s (%lld)", run.view.run.system.c_str(),
                                         static_cast<long long>(run.view.run.id)));
    breakdown.values.push_back({m.rollout_s.value_or(0), m.train_s.value_or(0),
                                m.sync_s.value_or(0), m.wait_s.value_or(0)});
  }
  files.push_back({"reward.svg", RenderLineChart(reward)});
  files.push_back({"throughput.svg", RenderLineChart(throughput)});
  files.push_back({"breakdown.svg", RenderStackedBars(breakdown)});
  for (const PlotRun& run : runs) {
    const std::string id = std::to_string(run.view.run.id);
    files.push_back({"allocation-run" + id + ".svg", AllocationPlot(run)});
    files.push_back({"lengths-run" + id + ".svg", LengthsPlot(run)});
  }
  return files;
}

}  // namespace libra::report
