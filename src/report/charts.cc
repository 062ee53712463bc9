#include "report/charts.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <regex>

#include "common/strings.h"

namespace libra::report {
namespace {

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
const char* Colour(size_t i) { return kPalette[i % kPaletteSize]; }

// The canvas is this wide; its height follows from what it holds.
constexpr double kWidth = 760;
// No text comes closer than this to the canvas's edge.
constexpr double kMargin = 12;
constexpr double kFont = 12;
constexpr double kTitleFont = 16;
constexpr double kLine = 15;  // a line of 12 px text
// The band left of the plot for the rotated y-axis title.
constexpr double kYTitleBand = 22;

// DejaVu Sans advance widths in 1/2048 em for ' ' .. '~' (the font librsvg and most Linux
// systems substitute for Helvetica; Helvetica and Arial are narrower).
constexpr int kAdvance[95] = {
    651,  821,  942,  1716, 1303, 1946, 1597, 563,  799,  799,  1024, 1716, 651,  739,  651,  690,
    1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 690,  690,  1716, 1716, 1716, 1087,
    2048, 1401, 1405, 1430, 1577, 1294, 1178, 1587, 1540, 604,  604,  1343, 1141, 1767, 1532, 1612,
    1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251, 1403, 799,  690,  799,  1716, 1024,
    1024, 1255, 1300, 1126, 1300, 1260, 721,  1300, 1298, 569,  569,  1186, 569,  1995, 1298, 1253,
    1300, 1300, 842,  1067, 803,  1298, 1212, 1675, 1212, 1212, 1075, 1303, 690,  1303, 1716};

/// Coordinates: at most 2 decimals, no "-0".
std::string Num(double v) {
  std::string s = StrFormat("%.2f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

/// `text` cut to fit `width` px, ending in "..." when cut.
std::string Fit(const std::string& text, double width, double size = kFont, bool bold = false) {
  if (TextWidth(text, size, bold) <= width) return text;
  std::string cut = text;
  while (!cut.empty() && TextWidth(cut + "...", size, bold) > width) cut.pop_back();
  return cut + "...";
}

/// `text` in lines no wider than `width` px, broken at spaces.
std::vector<std::string> WrapPixels(const std::string& text, double width, double size,
                                    bool bold = false) {
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& word : StrSplit(text, ' ')) {
    const std::string longer = line.empty() ? word : line + " " + word;
    if (!line.empty() && TextWidth(longer, size, bold) > width) {
      lines.push_back(line);
      line = word;
    } else {
      line = longer;
    }
  }
  lines.push_back(line);
  for (std::string& l : lines) l = Fit(l, width, size, bold);
  return lines;
}

/// A document under construction; its size is known only at the end.
class Svg {
 public:
  void Text(double x, double y, const std::string& text, const char* anchor,
            const std::string& extra = "") {
    body_ += StrFormat("<text x=\"%s\" y=\"%s\" text-anchor=\"%s\"%s%s>%s</text>\n", Num(x).c_str(),
                       Num(y).c_str(), anchor, extra.empty() ? "" : " ", extra.c_str(),
                       XmlEscape(text).c_str());
  }
  void Line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1,
            const std::string& extra = "") {
    body_ += StrFormat(
        "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"%s\"%s%s/>\n",
        Num(x1).c_str(), Num(y1).c_str(), Num(x2).c_str(), Num(y2).c_str(), stroke,
        Num(width).c_str(), extra.empty() ? "" : " ", extra.c_str());
  }
  void Rect(double x, double y, double w, double h, const char* fill) {
    body_ += StrFormat("<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\"/>\n",
                       Num(x).c_str(), Num(y).c_str(), Num(std::max(0.0, w)).c_str(),
                       Num(std::max(0.0, h)).c_str(), fill);
  }
  void Polyline(const std::vector<std::pair<double, double>>& points, const char* stroke,
                double width, double opacity) {
    std::vector<std::string> xy;
    for (const auto& [x, y] : points) xy.push_back(Num(x) + "," + Num(y));
    body_ += StrFormat(
        "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s "
        "stroke-linejoin=\"round\"/>\n",
        StrJoin(xy, " ").c_str(), stroke, Num(width).c_str(),
        opacity < 1 ? StrFormat(" stroke-opacity=\"%s\"", Num(opacity).c_str()).c_str() : "");
  }
  void Polygon(const std::vector<std::pair<double, double>>& points, const char* fill,
               double opacity = 1) {
    std::vector<std::string> xy;
    for (const auto& [x, y] : points) xy.push_back(Num(x) + "," + Num(y));
    if (opacity < 1) {
      body_ += StrFormat("<polygon points=\"%s\" fill=\"%s\" fill-opacity=\"%s\"/>\n",
                         StrJoin(xy, " ").c_str(), fill, Num(opacity).c_str());
      return;
    }
    // Stroked in its own colour, so that adjacent polygons show no seam.
    body_ += StrFormat("<polygon points=\"%s\" fill=\"%s\" stroke=\"%s\" stroke-width=\"0.5\"/>\n",
                       StrJoin(xy, " ").c_str(), fill, fill);
  }
  void Circle(double x, double y, const char* fill) {
    body_ += StrFormat("<circle cx=\"%s\" cy=\"%s\" r=\"2.5\" fill=\"%s\"/>\n", Num(x).c_str(),
                       Num(y).c_str(), fill);
  }
  /// Title and subtitle (wrapped to the canvas); returns the y below them.
  double Heading(const std::string& title, const std::string& subtitle) {
    title_ = title;
    double y = kMargin + kTitleFont;
    for (const std::string& line : WrapPixels(title, kWidth - 2 * kMargin, kTitleFont, true)) {
      Text(kMargin, y, line, "start", "font-size=\"16\" font-weight=\"bold\"");
      y += kTitleFont + 4;
    }
    if (!subtitle.empty()) {
      y += 2;
      for (const std::string& line : WrapPixels(subtitle, kWidth - 2 * kMargin, kFont)) {
        Text(kMargin, y, line, "start", "fill=\"#555555\"");
        y += kLine;
      }
    }
    return y + 4;
  }
  std::string Finish(double height) const {
    const std::string w = Num(kWidth);
    const std::string h = Num(std::ceil(height));
    return StrFormat(
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" "
               "viewBox=\"0 0 %s %s\" font-family=\"Helvetica, Arial, 'DejaVu Sans', "
               "sans-serif\" font-size=\"12\">\n"
               "<title>%s</title>\n"
               "<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n",
               w.c_str(), h.c_str(), w.c_str(), h.c_str(), XmlEscape(title_).c_str(), w.c_str(),
               h.c_str()) +
           body_ + "</svg>\n";
  }

 private:
  std::string title_;
  std::string body_;
};

/// "no data" in the middle of an otherwise empty chart.
std::string NoData(const std::string& title, const std::string& subtitle) {
  Svg svg;
  const double top = svg.Heading(title, subtitle);
  svg.Text(kWidth / 2, top + 60, "no data", "middle", "fill=\"#888888\"");
  return svg.Finish(top + 100);
}

/// A linear axis mapping [lo, hi] onto [from, to] pixels, with its tick values.
struct Axis {
  std::vector<double> ticks;
  double lo = 0;
  double hi = 1;
  double from = 0;
  double to = 1;
  double Map(double v) const {
    return hi > lo ? from + (v - lo) / (hi - lo) * (to - from) : (from + to) / 2;
  }
};

/// An axis over [lo, hi] with about `target` ticks. `to_tick`: the axis runs on to the first
/// tick at or above hi (a value axis); otherwise it ends with the data and only ticks inside
/// [lo, hi] are drawn.
Axis MakeAxis(double lo, double hi, double from, double to, bool to_tick, bool integers,
              int target) {
  // Numbers no axis can span (a damaged database's inf) leave a plain axis instead.
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo)) {
    lo = 0;
    hi = 1;
  }
  if (!(hi > lo)) {
    lo = lo - (lo == 0 ? 0 : 1);
    hi = hi + 1;
  }
  std::vector<double> ticks = NiceTicks(lo, hi, target);
  if (integers && ticks.size() > 1 && ticks[1] - ticks[0] < 1) {
    ticks.clear();
    for (double t = std::ceil(lo); t <= std::floor(hi) + 1e-9; ++t) ticks.push_back(t);
    if (to_tick && ticks.back() < hi) ticks.push_back(std::ceil(hi));
  }
  Axis axis;
  axis.from = from;
  axis.to = to;
  if (to_tick) {
    axis.lo = std::min(lo, ticks.front());
    axis.hi = std::max(hi, ticks.back());
    for (double t : ticks) {
      if (t >= axis.lo - 1e-9 && t <= axis.hi + 1e-9) axis.ticks.push_back(t);
    }
    return axis;
  }
  axis.lo = lo;
  axis.hi = hi;
  const double slack = (hi - lo) * 1e-9;
  for (double t : ticks) {
    if (t >= lo - slack && t <= hi + slack) axis.ticks.push_back(t);
  }
  if (axis.ticks.empty()) axis.ticks = {lo, hi};
  return axis;
}

/// An x axis whose tick labels do not collide: fewer ticks until they fit.
Axis MakeXAxis(double lo, double hi, double from, double to, bool integers, int target = 6) {
  for (int t = target; t >= 2; --t) {
    Axis axis = MakeAxis(lo, hi, from, to, false, integers, t);
    bool fits = true;
    for (size_t i = 1; i < axis.ticks.size(); ++i) {
      const double a = TextWidth(AxisNumber(axis.ticks[i - 1]), kFont);
      const double b = TextWidth(AxisNumber(axis.ticks[i]), kFont);
      if (axis.Map(axis.ticks[i]) - axis.Map(axis.ticks[i - 1]) < (a + b) / 2 + 10) fits = false;
    }
    if (fits || t == 2) return axis;
  }
  return MakeAxis(lo, hi, from, to, false, integers, 2);
}

/// The widest y tick label of a value axis over [lo, hi].
double YTickWidth(double lo, double hi, int target) {
  double width = 0;
  for (double t : MakeAxis(lo, hi, 0, 1, true, false, target).ticks) {
    width = std::max(width, TextWidth(AxisNumber(t), kFont));
  }
  return width;
}

void YGrid(Svg& svg, const Axis& y, double left, double right, bool labels) {
  for (double t : y.ticks) {
    const double py = y.Map(t);
    svg.Line(left, py, right, py, "#e5e5e5");
    if (labels) svg.Text(left - 6, py + 4, AxisNumber(t), "end");
  }
}

void XTicks(Svg& svg, const Axis& x, double bottom, bool labels) {
  for (double t : x.ticks) {
    const double px = x.Map(t);
    svg.Line(px, bottom, px, bottom + 4, "#333333");
    if (labels) svg.Text(px, bottom + 17, AxisNumber(t), "middle");
  }
}

void Frame(Svg& svg, double left, double top, double right, double bottom) {
  svg.Line(left, bottom, right, bottom, "#333333");
  svg.Line(left, top, left, bottom, "#333333");
}

void YTitle(Svg& svg, const std::string& label, double top, double bottom) {
  const double cy = (top + bottom) / 2;
  const double x = kMargin + kFont - 2;
  svg.Text(x, cy, Fit(label, bottom - top), "middle",
           StrFormat("transform=\"rotate(-90 %s %s)\"", Num(x).c_str(), Num(cy).c_str()));
}

/// A legend laid out in rows across [left, right] from `top`: swatches (or line keys) and labels;
/// returns the y below it.
double LegendRows(Svg* svg, const std::vector<std::string>& labels,
                  const std::vector<size_t>& colours, bool swatches, double left, double right,
                  double top) {
  double x = left;
  double y = top + kFont;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string label = Fit(labels[i], right - left - 24);
    const double w = 20 + TextWidth(label, kFont) + 16;
    if (x > left && x + w - 16 > right) {
      x = left;
      y += kLine + 3;
    }
    if (svg != nullptr) {
      if (swatches) {
        svg->Rect(x, y - 9, 14, 10, Colour(colours[i]));
      } else {
        svg->Line(x, y - 4, x + 14, y - 4, Colour(colours[i]), 2.5);
      }
      svg->Text(x + 20, y, label, "start");
    }
    x += w;
  }
  return y + 8;
}

/// Trailing moving mean over `window` points.
std::vector<std::pair<double, double>> MovingMean(
    const std::vector<std::pair<double, double>>& points, int window) {
  std::vector<std::pair<double, double>> out;
  double sum = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    sum += points[i].second;
    if (i >= static_cast<size_t>(window)) sum -= points[i - static_cast<size_t>(window)].second;
    const size_t n = std::min(i + 1, static_cast<size_t>(window));
    out.emplace_back(points[i].first, sum / static_cast<double>(n));
  }
  return out;
}

/// The finite points of a series.
std::vector<std::pair<double, double>> Finite(const Series& s) {
  std::vector<std::pair<double, double>> out;
  for (const auto& [x, y] : s.points) {
    if (std::isfinite(x) && std::isfinite(y)) out.emplace_back(x, y);
  }
  return out;
}

/// One series on the axes: the points faint behind their moving mean (or the points alone).
void DrawSeries(Svg& svg, const std::vector<std::pair<double, double>>& points, const Axis& x,
                const Axis& y, int smooth, const char* colour, bool faint_only = false) {
  auto map = [&](const std::vector<std::pair<double, double>>& in) {
    std::vector<std::pair<double, double>> out;
    for (const auto& [px, py] : in) out.emplace_back(x.Map(px), y.Map(py));
    return out;
  };
  if (points.size() == 1) {
    const auto p = map(points).front();
    svg.Circle(p.first, p.second, colour);
    return;
  }
  if (points.empty()) return;
  if (faint_only) {
    svg.Polyline(map(MovingMean(points, smooth)), colour, 1, 1);
    return;
  }
  if (smooth > 1) svg.Polyline(map(points), colour, 1, 0.3);
  svg.Polyline(map(MovingMean(points, smooth)), colour, 2, 1);
}

/// A series' band, faint in its colour: its high edge left to right, its low edge back.
void DrawBand(Svg& svg, const std::vector<BandPoint>& band, const Axis& x, const Axis& y,
              const char* colour) {
  std::vector<std::pair<double, double>> outline;
  for (const BandPoint& b : band) {
    if (std::isfinite(b.x) && std::isfinite(b.high))
      outline.emplace_back(x.Map(b.x), y.Map(b.high));
  }
  for (auto it = band.rbegin(); it != band.rend(); ++it) {
    if (std::isfinite(it->x) && std::isfinite(it->low)) {
      outline.emplace_back(x.Map(it->x), y.Map(it->low));
    }
  }
  if (outline.size() >= 3) svg.Polygon(outline, colour, 0.18);
}

std::string SmoothingNote(const LineChart& chart) {
  if (chart.smooth <= 1) return chart.subtitle;
  return chart.subtitle +
         StrFormat(" (lines: %d-point moving mean; faint: each point)", chart.smooth);
}

std::string SmallMultiples(const LineChart& chart, double x_lo, double x_hi, double y_lo,
                           double y_hi) {
  Svg svg;
  const double top =
      svg.Heading(chart.title, SmoothingNote(chart) + "; one panel per series, the others in grey");
  const size_t n = chart.series.size();
  const size_t cols = n <= 6 ? 2 : 3;
  const size_t rows = (n + cols - 1) / cols;
  const double tick_w = YTickWidth(y_lo, y_hi, 4);
  const double left = kMargin + kYTitleBand + tick_w + 8;
  const double right = kWidth - kMargin - 8;
  const double gap_x = 18;
  const double panel_w =
      (right - left - gap_x * static_cast<double>(cols - 1)) / static_cast<double>(cols);
  const double title_h = 18;
  const double panel_h = 110;
  const double gap_y = 26;
  const Axis y0 = MakeAxis(y_lo, y_hi, 0, 1, true, false, 4);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = i / cols;
    const size_t c = i % cols;
    const double px = left + static_cast<double>(c) * (panel_w + gap_x);
    const double py = top + static_cast<double>(r) * (title_h + panel_h + gap_y) + title_h;
    Axis y = y0;
    y.from = py + panel_h;
    y.to = py;
    const Axis x = MakeXAxis(x_lo, x_hi, px, px + panel_w, chart.x_integers, 4);
    svg.Text(px, py - 6, Fit(chart.series[i].label, panel_w), "start",
             StrFormat("font-weight=\"bold\" fill=\"%s\"", Colour(i)));
    YGrid(svg, y, px, px + panel_w, c == 0);
    // Tick labels under a panel with no panel below it.
    XTicks(svg, x, py + panel_h, i + cols >= n);
    Frame(svg, px, py, px + panel_w, py + panel_h);
    for (size_t j = 0; j < n; ++j) {
      if (j != i) DrawSeries(svg, Finite(chart.series[j]), x, y, chart.smooth, "#c8c8c8", true);
    }
    DrawBand(svg, chart.series[i].band, x, y, Colour(i));
    DrawSeries(svg, Finite(chart.series[i]), x, y, chart.smooth, Colour(i));
  }
  const double bottom = top + static_cast<double>(rows) * (title_h + panel_h + gap_y) - gap_y;
  YTitle(svg, chart.y_label, top, bottom);
  svg.Text((left + right) / 2, bottom + 38, chart.x_label, "middle");
  return svg.Finish(bottom + 38 + kMargin);
}

}  // namespace

double TextWidth(std::string_view text, double size, bool bold) {
  double units = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      units += kAdvance[c - 0x20];
    } else if (c >= 0xc0) {
      units += 2048;  // the first byte of a multi-byte character: a full em
    }
  }
  return units / 2048 * size * (bold ? 1.1 : 1.0);
}

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
  std::optional<double> x_lo, x_hi, y_lo, y_hi;
  for (const Series& s : chart.series) {
    for (const auto& [x, y] : Finite(s)) {
      x_lo = std::min(x_lo.value_or(x), x);
      x_hi = std::max(x_hi.value_or(x), x);
      y_lo = std::min(y_lo.value_or(y), y);
      y_hi = std::max(y_hi.value_or(y), y);
    }
    for (const BandPoint& b : s.band) {
      if (!y_lo || !std::isfinite(b.low) || !std::isfinite(b.high)) continue;
      y_lo = std::min(*y_lo, b.low);
      y_hi = std::max(*y_hi, b.high);
    }
  }
  if (!x_lo) return NoData(chart.title, chart.subtitle);
  if (chart.y_from_zero) y_lo = std::min(0.0, *y_lo);
  if (chart.series.size() > kMaxOverlaidSeries) {
    return SmallMultiples(chart, *x_lo, *x_hi, *y_lo, *y_hi);
  }
  Svg svg;
  const double top = svg.Heading(chart.title, SmoothingNote(chart));
  // The legend goes right of the plot when it is narrow enough, else above it.
  double label_w = 0;
  for (const Series& s : chart.series) label_w = std::max(label_w, TextWidth(s.label, kFont));
  const bool legend_right = label_w <= 220;
  const double legend_w = legend_right ? label_w + 20 : 0;
  const double left = kMargin + kYTitleBand + YTickWidth(*y_lo, *y_hi, 6) + 8;
  const double right = kWidth - kMargin - (legend_right ? legend_w + 16 : 8);
  std::vector<std::string> labels;
  std::vector<size_t> colours;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    labels.push_back(chart.series[i].label);
    colours.push_back(i);
  }
  double plot_top = top + 6;
  if (!legend_right) plot_top = LegendRows(&svg, labels, colours, false, left, right, top) + 4;
  const double plot_bottom = plot_top + 290;
  const Axis x = MakeXAxis(*x_lo, *x_hi, left, right, chart.x_integers);
  const Axis y = MakeAxis(*y_lo, *y_hi, plot_bottom, plot_top, true, false, 6);
  YGrid(svg, y, left, right, true);
  XTicks(svg, x, plot_bottom, true);
  Frame(svg, left, plot_top, right, plot_bottom);
  YTitle(svg, chart.y_label, plot_top, plot_bottom);
  svg.Text((left + right) / 2, plot_bottom + 38, chart.x_label, "middle");
  for (size_t i = 0; i < chart.series.size(); ++i) {
    DrawBand(svg, chart.series[i].band, x, y, Colour(i));
  }
  for (size_t i = 0; i < chart.series.size(); ++i) {
    DrawSeries(svg, Finite(chart.series[i]), x, y, chart.smooth, Colour(i));
  }
  if (legend_right) {
    const double lx = kWidth - kMargin - legend_w;
    for (size_t i = 0; i < labels.size(); ++i) {
      const double ly = plot_top + 8 + 20 * static_cast<double>(i);
      svg.Line(lx, ly - 4, lx + 14, ly - 4, Colour(i), 2.5);
      svg.Text(lx + 20, ly, labels[i], "start");
    }
  }
  return svg.Finish(plot_bottom + 38 + kMargin);
}

namespace {

/// The smallest and largest finite ends of the chart's spans; nullopt when it has none.
std::optional<std::pair<double, double>> SpanRange(const HorizontalBars& chart) {
  std::optional<double> lo, hi;
  for (const HorizontalBars::Row& row : chart.rows) {
    for (const auto& lane : row.lanes) {
      for (const HorizontalBars::Span& s : lane) {
        if (!std::isfinite(s.from) || !std::isfinite(s.to)) continue;
        lo = std::min(lo.value_or(s.from), std::min(s.from, s.to));
        hi = std::max(hi.value_or(s.to), std::max(s.from, s.to));
      }
    }
  }
  if (!lo) return std::nullopt;
  return std::make_pair(*lo, *hi);
}

/// The legend lists the parts some span uses, with their colours.
void UsedParts(const HorizontalBars& chart, std::vector<std::string>* legend,
               std::vector<size_t>* colours) {
  std::vector<bool> used(chart.parts.size(), false);
  for (const HorizontalBars::Row& row : chart.rows) {
    for (const auto& lane : row.lanes) {
      for (const HorizontalBars::Span& s : lane) {
        if (s.part < used.size() && s.to > s.from) used[s.part] = true;
      }
    }
  }
  for (size_t i = 0; i < chart.parts.size(); ++i) {
    if (!used[i]) continue;
    legend->push_back(chart.parts[i]);
    colours->push_back(i);
  }
}

}  // namespace

std::string RenderHorizontalBars(const HorizontalBars& chart) {
  const std::optional<std::pair<double, double>> range = SpanRange(chart);
  if (!range) return NoData(chart.title, chart.subtitle);
  const double lo = std::min(range->first, 0.0);
  const double hi = range->second;
  Svg svg;
  const double top = svg.Heading(chart.title, chart.subtitle);
  double label_w = 0;
  double note_w = 0;
  for (const HorizontalBars::Row& row : chart.rows) {
    label_w = std::max(label_w, TextWidth(row.label, kFont));
    if (!row.lanes.empty()) note_w = std::max(note_w, TextWidth(row.note, kFont));
  }
  label_w = std::min(label_w, 220.0);
  const double left = kMargin + label_w + 10;
  const double right = kWidth - kMargin - (note_w > 0 ? note_w + 8 : 4);
  std::vector<std::string> legend;
  std::vector<size_t> colours;
  UsedParts(chart, &legend, &colours);
  const double plot_top = LegendRows(&svg, legend, colours, true, left, right, top) + 6;
  const Axis x = MakeXAxis(lo, hi, left, right, false);
  // Row heights: the first lane 16 px, the others 8, 3 px apart, 16 px between rows.
  std::vector<double> row_top;
  double y = plot_top;
  for (const HorizontalBars::Row& row : chart.rows) {
    row_top.push_back(y);
    double h = 16;
    for (size_t l = 1; l < row.lanes.size(); ++l) h += 11;
    y += h + 16;
  }
  const double plot_bottom = y - 8;
  if (lo < 0) {
    svg.Rect(x.Map(lo), plot_top - 4, x.Map(0) - x.Map(lo), plot_bottom - plot_top + 4, "#f0f0f0");
  }
  for (double t : x.ticks) svg.Line(x.Map(t), plot_top - 4, x.Map(t), plot_bottom, "#e5e5e5");
  for (size_t r = 0; r < chart.rows.size(); ++r) {
    const HorizontalBars::Row& row = chart.rows[r];
    double lane_y = row_top[r];
    svg.Text(left - 8, row_top[r] + 12, Fit(row.label, label_w), "end");
    if (row.lanes.empty()) {
      svg.Text(left + 4, row_top[r] + 12, row.note, "start", "fill=\"#555555\"");
      continue;
    }
    for (size_t l = 0; l < row.lanes.size(); ++l) {
      const double h = l == 0 ? 16 : 8;
      for (const HorizontalBars::Span& s : row.lanes[l]) {
        if (!(s.to > s.from)) continue;
        svg.Rect(x.Map(s.from), lane_y, x.Map(s.to) - x.Map(s.from), h, Colour(s.part));
      }
      lane_y += h + 3;
    }
    if (!row.note.empty()) svg.Text(right + 8, row_top[r] + 12, row.note, "start");
  }
  if (lo < 0) svg.Line(x.Map(0), plot_top - 4, x.Map(0), plot_bottom, "#333333", 1);
  XTicks(svg, x, plot_bottom, true);
  svg.Line(left, plot_bottom, right, plot_bottom, "#333333");
  double bottom = plot_bottom + 38;
  svg.Text((left + right) / 2, bottom, chart.x_label, "middle");
  if (lo < 0 && !chart.before_zero.empty()) {
    // Under the axis title, by the shaded band it explains.
    bottom += kLine + 2;
    svg.Text(left, bottom, "shaded: " + chart.before_zero, "start", "fill=\"#555555\"");
  }
  return svg.Finish(bottom + kMargin);
}

std::string RenderStackedSteps(const StackedSteps& chart) {
  double top_value = 0;
  for (const std::vector<double>& v : chart.values) {
    double sum = 0;
    for (double x : v) sum += std::max(0.0, x);
    top_value = std::max(top_value, sum);
  }
  if (chart.values.empty() || chart.x.size() != chart.values.size() + 1 || !(top_value > 0)) {
    return NoData(chart.title, chart.subtitle);
  }
  Svg svg;
  const double top = svg.Heading(chart.title, chart.subtitle);
  const double left = kMargin + kYTitleBand + YTickWidth(0, top_value, 6) + 8;
  const double right = kWidth - kMargin - 8;
  std::vector<std::string> shown;
  std::vector<size_t> shown_parts;
  for (size_t p = 0; p < chart.parts.size(); ++p) {
    for (const std::vector<double>& v : chart.values) {
      if (v[p] > 0) {
        shown.push_back(chart.parts[p]);
        shown_parts.push_back(p);
        break;
      }
    }
  }
  std::vector<size_t> colours;
  for (size_t i = 0; i < shown.size(); ++i) colours.push_back(i);
  const double plot_top = LegendRows(&svg, shown, colours, true, left, right, top) + 6;
  const double plot_bottom = plot_top + 280;
  const Axis x = MakeXAxis(chart.x.front(), chart.x.back(), left, right, false);
  const Axis y = MakeAxis(0, top_value, plot_bottom, plot_top, true, true, 6);
  YGrid(svg, y, left, right, true);
  std::vector<double> base(chart.values.size(), 0);
  for (size_t k = 0; k < shown_parts.size(); ++k) {
    const size_t p = shown_parts[k];
    for (size_t i = 0; i < chart.values.size(); ++i) {
      const double v = std::max(0.0, chart.values[i][p]);
      if (v <= 0) continue;
      const double x0 = x.Map(chart.x[i]);
      const double x1 = x.Map(chart.x[i + 1]);
      svg.Polygon({{x0, y.Map(base[i])},
                   {x1, y.Map(base[i])},
                   {x1, y.Map(base[i] + v)},
                   {x0, y.Map(base[i] + v)}},
                  Colour(k));
      base[i] += v;
    }
  }
  XTicks(svg, x, plot_bottom, true);
  Frame(svg, left, plot_top, right, plot_bottom);
  YTitle(svg, chart.y_label, plot_top, plot_bottom);
  svg.Text((left + right) / 2, plot_bottom + 38, chart.x_label, "middle");
  return svg.Finish(plot_bottom + 38 + kMargin);
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

namespace {

const std::vector<std::string> kBreakdownParts = {"rollout of the batch", "trainer waits for it",
                                                  "train", "weight sync", "other (layout changes)"};

/// The training GPUs of a layout string ("train 8 (...) | ..."); nullopt when it names none.
std::optional<int> TrainGpus(const std::string& layout) {
  static const std::regex kTrain(R"(train (\d+))");
  std::smatch m;
  if (!std::regex_search(layout, m, kTrain)) return std::nullopt;
  return std::stoi(m[1].str());
}

bool Colocated(const std::string& layout) {
  return layout.find("(colocated)") != std::string::npos;
}

bool AnySimulated(const std::vector<PlotRun>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [](const PlotRun& r) { return r.view.run.Simulated(); });
}

std::string RunLabel(const records::RunInfo& run) {
  return StrFormat("%s (run %lld)", run.system.c_str(), static_cast<long long>(run.id));
}

std::string Names(const std::vector<PlotRun>& runs) {
  std::vector<std::string> names;
  for (const PlotRun& r : runs) names.push_back(r.view.run.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return StrJoin(names, ", ");
}

/// Percentile (nearest rank) of sorted values.
double Percentile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

/// The moving-mean window for a per-step series of `points` points: about a twentieth of them,
/// at least 3 (the window of "to reward s"), at most 25; none for a handful of points.
int SmoothingWindow(size_t points) {
  if (points < 6) return 1;
  return static_cast<int>(std::clamp<size_t>(points / 20, 3, 25));
}

std::string LengthsPlot(const PlotRun& run) {
  std::map<int, std::vector<double>> by_step;
  for (const records::TrajectoryRecord& t : run.trajectories) {
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

/// Where a step's time goes, per run: BreakdownRow of each.
std::string BreakdownPlot(const std::vector<PlotRun>& runs) {
  HorizontalBars chart;
  chart.title = "Where a step's time goes";
  chart.subtitle =
      Names(runs) +
      ": mean over steps, from the step's start (the end of the previous train step). Top bar: "
      "the trainer; thin bar: the rollout of the batch it trains, which overlaps earlier steps "
      "when the pipeline is asynchronous";
  chart.x_label = "seconds from the step's start (mean over steps)";
  chart.parts = kBreakdownParts;
  chart.before_zero = "during earlier steps";
  for (const PlotRun& run : runs) chart.rows.push_back(BreakdownRow(run));
  return RenderHorizontalBars(chart);
}

/// Where each run's GPU-seconds went, per trained trajectory: why one system is faster than
/// another on the same cluster.
std::string GpuSecondsPlot(const std::vector<PlotRun>& runs) {
  HorizontalBars chart;
  chart.title = "Where the GPU-seconds went";
  chart.subtitle = Names(runs) +
                   ": GPU-seconds of the whole cluster per trained trajectory; fewer is faster "
                   "on the same GPUs. Switching: the trainer's side of weight syncs and GPUs "
                   "changing role; idle: waiting for work, bubbles, GPUs no layout used";
  chart.x_label = "GPU-seconds per trajectory";
  chart.parts = {"generating (rollout)", "training", "switching", "idle"};
  for (const PlotRun& run : runs) {
    HorizontalBars::Row row;
    row.label = RunLabel(run.view.run);
    const GpuSeconds g = AccountGpuSeconds(run.view, run.events);
    if (g.trajectories == 0) {
      row.note = "no steps";
    } else if (!g.rollout || !g.idle) {
      row.note = "not recorded: the backend cannot tell busy GPUs from idle ones";
    } else {
      const double n = static_cast<double>(g.trajectories);
      double at = 0;
      std::vector<HorizontalBars::Span> lane;
      for (const auto& [value, part] : std::vector<std::pair<double, size_t>>{
               {*g.rollout / n, 0}, {g.training / n, 1}, {g.switching / n, 2}, {*g.idle / n, 3}}) {
        lane.push_back({at, at + value, part});
        at += value;
      }
      row.lanes.push_back(lane);
      row.note = StrFormat("%.1f GPU-s, %.0f%% idle", g.total / n,
                           g.total > 0 ? 100 * *g.idle / g.total : 0.0);
    }
    chart.rows.push_back(std::move(row));
  }
  return RenderHorizontalBars(chart);
}

}  // namespace

HorizontalBars::Row BreakdownRow(const PlotRun& run) {
  HorizontalBars::Row row;
  row.label = RunLabel(run.view.run);
  const std::vector<records::StepRecord>& steps = run.view.steps;
  if (steps.empty()) {
    row.note = "no steps";
    return row;
  }
  // The batch of each step: its first trajectory's start and its last one's end.
  std::map<int, std::pair<double, double>> batch;
  for (const records::TrajectoryRecord& t : run.trajectories) {
    auto [it, fresh] = batch.try_emplace(t.step, t.start_s, t.end_s);
    if (!fresh) {
      it->second.first = std::min(it->second.first, t.start_s);
      it->second.second = std::max(it->second.second, t.end_s);
    }
  }
  double wait = 0, train = 0, sync = 0, step = 0, rollout_from = 0, rollout_to = 0;
  int with_batch = 0;
  for (const records::StepRecord& s : steps) {
    wait += s.wait_s;
    train += s.train_s;
    sync += s.sync_s;
    step += s.end_s - s.start_s;
    if (auto it = batch.find(s.step); it != batch.end()) {
      rollout_from += it->second.first - s.start_s;
      rollout_to += it->second.second - s.start_s;
      ++with_batch;
    }
  }
  const double n = static_cast<double>(steps.size());
  wait /= n;
  train /= n;
  sync /= n;
  step /= n;
  // The trainer's step: waiting, training, syncing, one after another; anything left of the step
  // (layout changes) last.
  std::vector<HorizontalBars::Span> trainer = {
      {0, wait, 1}, {wait, wait + train, 2}, {wait + train, wait + train + sync, 3}};
  if (step > wait + train + sync + 1e-9) trainer.push_back({wait + train + sync, step, 4});
  row.lanes.push_back(trainer);
  if (with_batch > 0)
    row.lanes.push_back({{rollout_from / with_batch, rollout_to / with_batch, 0}});
  row.note = StrFormat("%.1f s", step);
  return row;
}

GpuSeconds AccountGpuSeconds(const RunView& view, const std::vector<records::EventRecord>& events) {
  GpuSeconds g;
  if (view.steps.empty()) return g;
  g.total = view.run.gpus * view.steps.back().end_s;
  double rollout = 0;
  bool known = true;
  for (const records::StepRecord& s : view.steps) {
    g.trajectories += s.trajectories;
    g.training += s.train_s * s.train_gpus;
    g.switching += s.sync_s * s.train_gpus;  // the trainer's side of the weight sync
    if (!s.idle_gpu_s) {
      known = false;
      continue;
    }
    // The GPUs of the step's layout (a colocated one counts its GPUs once).
    const int gpus = std::min(s.train_gpus + s.rollout_gpus, view.run.gpus);
    const double used = (s.end_s - s.start_s) * gpus - *s.idle_gpu_s;
    rollout += std::max(0.0, used - s.train_s * s.train_gpus);
  }
  // GPUs changing role in layout changes.
  std::optional<int> train;
  for (const records::EventRecord& e : events) {
    if (e.kind != "relayout" && e.kind != "switch") continue;
    const std::optional<int> next = TrainGpus(e.detail);
    if (next && train) g.switching += (e.end_s - e.start_s) * std::abs(*next - *train);
    if (next) train = next;
  }
  if (known) {
    g.rollout = rollout;
    const double rest = g.total - g.training - rollout;
    g.switching = std::min(g.switching, std::max(0.0, rest));
    g.idle = std::max(0.0, rest - g.switching);
  }
  return g;
}

namespace {

/// A layout change: from `start` to `end` the GPUs move to `layout`.
struct LayoutChange {
  double start, end;
  std::string layout;
};

/// What a run's records say of its layouts: the first in force, every change, and the spans
/// that matter for a colocated layout.
struct LayoutHistory {
  std::string initial;
  std::vector<LayoutChange> changes;
  int lends = 0;
  int reclaims = 0;
  std::vector<std::pair<double, double>> train_spans, sync_spans;
};

LayoutHistory LayoutHistoryOf(const PlotRun& run) {
  LayoutHistory h;
  for (const records::DecisionRecord& d : run.decisions) {
    if (d.applied) {
      h.initial = d.layout;
      break;
    }
  }
  for (const records::EventRecord& e : run.events) {
    if (e.kind == "relayout") h.changes.push_back({e.start_s, e.end_s, e.detail});
    if (e.kind == "lend") ++h.lends;
    if (e.kind == "reclaim") ++h.reclaims;
    if (e.kind == "train") h.train_spans.emplace_back(e.start_s, e.end_s);
    if (e.kind == "sync") h.sync_spans.emplace_back(e.start_s, e.end_s);
  }
  if (h.changes.empty()) {
    // A run recorded without layout-change events: its applied decisions, as instant changes.
    bool first = true;
    for (const records::DecisionRecord& d : run.decisions) {
      if (!d.applied) continue;
      if (!first) h.changes.push_back({d.at_s, d.at_s, d.layout});
      first = false;
    }
  }
  if (h.initial.empty() && !h.changes.empty()) h.initial = h.changes.front().layout;
  return h;
}

/// No plan or layout change recorded: what each step says it used.
StackedSteps AllocationPerStep(const PlotRun& run) {
  StackedSteps chart;
  chart.parts = {"training", "rollout"};
  for (const records::StepRecord& s : run.view.steps) {
    if (chart.x.empty()) chart.x.push_back(s.start_s);
    chart.x.push_back(s.end_s);
    chart.values.push_back(
        {static_cast<double>(s.train_gpus), static_cast<double>(s.rollout_gpus)});
  }
  chart.title = "GPU allocation over time";
  chart.subtitle = RunLabel(run.view.run) + ": training and rollout GPUs of each step";
  chart.x_label = "wall-clock (s)";
  chart.y_label = "GPUs";
  return chart;
}

/// The parts of an allocation chart (training, rollout by TP size, or plain rollout when a layout
/// does not say, and switching) and the GPUs of each part under a layout.
class AllocationParts {
 public:
  AllocationParts(const LayoutHistory& h, int gpus) : gpus_(gpus) {
    auto note_tps = [&](const std::string& layout) {
      for (const auto& [tp, g] : RolloutGpusByTp(layout)) tp_part_.emplace(tp, 0);
    };
    note_tps(h.initial);
    for (const LayoutChange& c : h.changes) note_tps(c.layout);
    names_.push_back("training");
    for (auto& [tp, index] : tp_part_) {
      index = names_.size();
      names_.push_back(StrFormat("rollout TP%d", tp));
    }
    plain_rollout_ = names_.size();
    names_.push_back("rollout");
    switching_ = names_.size();
    names_.push_back("switching");
  }
  const std::vector<std::string>& names() const { return names_; }
  size_t switching() const { return switching_; }

  /// GPUs per part of `layout`: in a colocated one every GPU does one thing at a time, `role`.
  std::vector<double> Values(const std::string& layout, std::string_view role) const {
    std::vector<double> v(names_.size(), 0);
    const int train = TrainGpus(layout).value_or(0);
    const std::vector<std::pair<int, int>> by_tp = RolloutGpusByTp(layout);
    if (Colocated(layout)) {
      const size_t index = role == "training"    ? 0
                           : role == "switching" ? switching_
                           : by_tp.size() == 1   ? tp_part_.at(by_tp.front().first)
                                                 : plain_rollout_;
      v[index] = std::max(train, gpus_);
      return v;
    }
    v[0] = train;
    for (const auto& [tp, g] : by_tp) v[tp_part_.at(tp)] = g;
    if (by_tp.empty()) v[plain_rollout_] = std::max(0, gpus_ - train);
    return v;
  }

 private:
  int gpus_;
  std::vector<std::string> names_;
  std::map<int, size_t> tp_part_;
  size_t plain_rollout_ = 0;
  size_t switching_ = 0;
};

/// Boundaries between which the allocation is constant: every change's start and end, and for
/// colocated layouts every train and sync span; sorted, none after `end`.
std::vector<double> AllocationCuts(const LayoutHistory& h, double end) {
  std::vector<double> cuts = {0, end};
  for (const LayoutChange& c : h.changes) {
    cuts.push_back(c.start);
    cuts.push_back(c.end);
  }
  for (const auto& spans : {&h.train_spans, &h.sync_spans}) {
    for (const auto& [a, b] : *spans) {
      cuts.push_back(a);
      cuts.push_back(b);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end(),
                         [](double a, double b) { return std::abs(a - b) < 1e-9; }),
             cuts.end());
  while (!cuts.empty() && cuts.back() > end + 1e-9) cuts.pop_back();
  return cuts;
}

bool Inside(const std::vector<std::pair<double, double>>& spans, double t) {
  return std::any_of(spans.begin(), spans.end(),
                     [t](const auto& s) { return t >= s.first && t < s.second; });
}

/// The allocation at time `mid`: the layout in force, or during a change the GPUs that keep
/// their role, the rest switching.
std::vector<double> AllocationAt(const LayoutHistory& h, const AllocationParts& parts, int gpus,
                                 double mid) {
  std::string before = h.initial;
  const LayoutChange* moving = nullptr;
  for (const LayoutChange& c : h.changes) {
    if (c.end <= mid) before = c.layout;
    if (c.start <= mid && mid < c.end) moving = &c;
  }
  if (moving != nullptr) {
    const std::vector<double> from = parts.Values(before, "rollout");
    const std::vector<double> to = parts.Values(moving->layout, "rollout");
    std::vector<double> v(parts.names().size(), 0);
    double kept = 0;
    for (size_t p = 0; p < v.size(); ++p) {
      v[p] = std::min(from[p], to[p]);
      kept += v[p];
    }
    v[parts.switching()] = std::max(0.0, gpus - kept);
    return v;
  }
  if (Colocated(before)) {
    return parts.Values(before, Inside(h.train_spans, mid)  ? "training"
                                : Inside(h.sync_spans, mid) ? "switching"
                                                            : "rollout");
  }
  return parts.Values(before, "rollout");
}

}  // namespace

StackedSteps AllocationOverTime(const PlotRun& run) {
  const std::vector<records::StepRecord>& steps = run.view.steps;
  if (steps.empty()) return StackedSteps();
  const LayoutHistory h = LayoutHistoryOf(run);
  if (h.initial.empty()) return AllocationPerStep(run);
  const int gpus = run.view.run.gpus;
  const AllocationParts parts(h, gpus);
  StackedSteps chart;
  chart.parts = parts.names();
  const std::vector<double> cuts = AllocationCuts(h, steps.back().end_s);
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    std::vector<double> v = AllocationAt(h, parts, gpus, (cuts[i] + cuts[i + 1]) / 2);
    if (!chart.values.empty() && chart.values.back() == v) {
      chart.x.back() = cuts[i + 1];  // the same allocation goes on
      continue;
    }
    if (chart.x.empty()) chart.x.push_back(cuts[i]);
    chart.x.push_back(cuts[i + 1]);
    chart.values.push_back(std::move(v));
  }
  chart.title = "GPU allocation over time";
  std::string what = "training, rollout by TP size, switching";
  if (Colocated(h.initial)) what = "colocated: all GPUs roll out, then train, then load weights";
  chart.subtitle = RunLabel(run.view.run) + ": " + what;
  if (h.lends + h.reclaims > 0) {
    chart.subtitle += StrFormat("; %d lend%s and %d reclaim%s of the trainer's GPUs", h.lends,
                                h.lends == 1 ? "" : "s", h.reclaims, h.reclaims == 1 ? "" : "s");
  }
  const int moves = static_cast<int>(h.changes.size()) - h.lends - h.reclaims;
  if (moves > 0) chart.subtitle += StrFormat("; %d planner move%s", moves, moves == 1 ? "" : "s");
  chart.x_label = "wall-clock (s)";
  chart.y_label = "GPUs";
  return chart;
}

namespace {

/// Runs grouped by system, in the order of each system's first run.
std::vector<std::vector<const PlotRun*>> BySystem(const std::vector<PlotRun>& runs) {
  std::vector<std::vector<const PlotRun*>> groups;
  std::map<std::string, size_t> index;
  for (const PlotRun& run : runs) {
    auto [it, fresh] = index.try_emplace(run.view.run.system, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&run);
  }
  return groups;
}

/// The curve's value at x, linear between its points. REQUIRES: curve[0].first <= x <= its last.
double Interpolate(const std::vector<std::pair<double, double>>& curve, double x) {
  for (size_t i = 1; i < curve.size(); ++i) {
    if (x > curve[i].first) continue;
    const auto& [x0, y0] = curve[i - 1];
    const auto& [x1, y1] = curve[i];
    return x1 > x0 ? y0 + (y1 - y0) * (x - x0) / (x1 - x0) : y1;
  }
  return curve.back().second;
}

std::string SeedsLabel(const std::vector<const PlotRun*>& group) {
  if (group.size() == 1) return RunLabel(group[0]->view.run);
  return StrFormat("%s (%zu seeds)", group[0]->view.run.system.c_str(), group.size());
}

}  // namespace

LineChart EvalChart(const std::vector<PlotRun>& runs) {
  LineChart chart;
  const bool modelled = AnySimulated(runs);
  chart.title =
      modelled ? "Evaluation score over wall-clock (modelled)" : "Evaluation score over wall-clock";
  chart.subtitle =
      Names(runs) +
      (modelled ? ": the skill model's expected reward on held-out prompts"
                : ": mean reward of held-out prompts, generated by the engines and scored by "
                  "the reward command") +
      "; with several seeds, their mean up to the end of the shortest, the band their range";
  chart.x_label = "wall-clock (s)";
  chart.y_label = "evaluation score";
  chart.y_from_zero = false;
  size_t longest = 0;
  for (const std::vector<const PlotRun*>& group : BySystem(runs)) {
    std::vector<std::vector<std::pair<double, double>>> curves;
    for (const PlotRun* run : group) {
      std::vector<std::pair<double, double>> curve = EvalCurve(run->view);
      if (!curve.empty()) curves.push_back(std::move(curve));
    }
    Series series{SeedsLabel(group), {}};
    if (curves.size() == 1) {
      series.points = curves[0];
    } else if (curves.size() > 1) {
      double start = 0;
      double end = std::numeric_limits<double>::infinity();
      std::vector<double> grid;
      for (const auto& curve : curves) {
        start = std::max(start, curve.front().first);
        end = std::min(end, curve.back().first);
        for (const auto& point : curve) grid.push_back(point.first);
      }
      std::sort(grid.begin(), grid.end());
      grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
      for (double x : grid) {
        if (x < start || x > end) continue;
        double sum = 0;
        double low = std::numeric_limits<double>::infinity();
        double high = -low;
        for (const auto& curve : curves) {
          const double v = Interpolate(curve, x);
          sum += v;
          low = std::min(low, v);
          high = std::max(high, v);
        }
        series.points.emplace_back(x, sum / static_cast<double>(curves.size()));
        series.band.push_back({x, low, high});
      }
    }
    longest = std::max(longest, series.points.size());
    chart.series.push_back(std::move(series));
  }
  chart.smooth = SmoothingWindow(longest);
  return chart;
}

HorizontalBars TimeToTargetChart(const std::vector<PlotRun>& runs, const Convergence& convergence) {
  std::vector<RunView> views;
  for (const PlotRun& run : runs) views.push_back(run.view);
  const std::map<uint64_t, double> targets = EvalTargets(views, convergence);
  HorizontalBars chart;
  chart.title = "Time to the evaluation target";
  chart.subtitle =
      Names(runs) + ": " +
      (convergence.target
           ? StrFormat("when the evaluation score first reached %s",
                       Num(*convergence.target).c_str())
           : StrFormat("when the evaluation score first reached %s%% of the way from the initial "
                       "score to the best final score among the runs of its seed",
                       Num(100 * convergence.fraction).c_str())) +
      " (interpolated between evaluations); the bar is the mean over the seeds that reached it, "
      "the thin bar their range";
  chart.x_label = "wall-clock (s)";
  chart.parts = {"mean time to target", "range over seeds"};
  for (const std::vector<const PlotRun*>& group : BySystem(runs)) {
    HorizontalBars::Row row;
    row.label = group.size() == 1 ? RunLabel(group[0]->view.run) : group[0]->view.run.system;
    std::vector<double> reached;
    for (const PlotRun* run : group) {
      auto target = targets.find(run->view.run.seed);
      if (target == targets.end()) continue;
      if (std::optional<double> t = TimeToTarget(run->view, target->second)) reached.push_back(*t);
    }
    const std::string seeds =
        group.size() == 1 ? "" : StrFormat(", %zu of %zu seeds", reached.size(), group.size());
    if (reached.empty()) {
      row.note = "not reached" + seeds;
      chart.rows.push_back(std::move(row));
      continue;
    }
    double sum = 0;
    for (double t : reached) sum += t;
    const double mean = sum / static_cast<double>(reached.size());
    const auto [low, high] = std::minmax_element(reached.begin(), reached.end());
    row.lanes.push_back({{0, mean, 0}});
    if (reached.size() > 1) row.lanes.push_back({{*low, *high, 1}});
    row.note = StrFormat("%.1f s", mean) + seeds;
    chart.rows.push_back(std::move(row));
  }
  return chart;
}

std::vector<PlotFile> BuildPlots(const std::vector<PlotRun>& runs, const Convergence& convergence) {
  const std::string names = Names(runs);
  std::vector<PlotFile> files;
  files.push_back({"eval.svg", RenderLineChart(EvalChart(runs))});
  files.push_back(
      {"time-to-target.svg", RenderHorizontalBars(TimeToTargetChart(runs, convergence))});
  LineChart reward;
  reward.title = AnySimulated(runs) ? "Batch reward over wall-clock (modelled)"
                                    : "Batch reward over wall-clock";
  reward.subtitle = names + ": mean reward of each step's batch (eval.svg has the unbiased score)" +
                    (AnySimulated(runs) ? "; simulated runs draw it from the skill model" : "");
  reward.x_label = "wall-clock (s)";
  reward.y_label = "mean reward";
  LineChart throughput;
  throughput.title = "Throughput per step";
  throughput.subtitle = names + ": trajectories trained per second of each step";
  throughput.x_label = "step";
  throughput.x_integers = true;
  throughput.y_label = "trajectories / s";
  size_t longest = 0;
  for (const PlotRun& run : runs) {
    Series r{RunLabel(run.view.run), {}};
    Series t{RunLabel(run.view.run), {}};
    for (const records::StepRecord& s : run.view.steps) {
      r.points.emplace_back(s.end_s, s.reward_mean);
      if (s.end_s > s.start_s) {
        t.points.emplace_back(s.step, s.trajectories / (s.end_s - s.start_s));
      }
    }
    longest = std::max(longest, run.view.steps.size());
    reward.series.push_back(std::move(r));
    throughput.series.push_back(std::move(t));
  }
  reward.smooth = throughput.smooth = SmoothingWindow(longest);
  files.push_back({"reward.svg", RenderLineChart(reward)});
  files.push_back({"throughput.svg", RenderLineChart(throughput)});
  files.push_back({"breakdown.svg", BreakdownPlot(runs)});
  files.push_back({"gpu-seconds.svg", GpuSecondsPlot(runs)});
  for (const PlotRun& run : runs) {
    const std::string id = std::to_string(run.view.run.id);
    files.push_back({"allocation-run" + id + ".svg", RenderStackedSteps(AllocationOverTime(run))});
    files.push_back({"lengths-run" + id + ".svg", LengthsPlot(run)});
  }
  return files;
}

}  // namespace libra::report
