#include "support/svg_layout.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/strings.h"
#include "support/png.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

// Room around the canvas, so that ink outside it is rendered and seen.
constexpr int kMargin = 200;
// A text strip: a single line of text fits in it, its baseline kBaseline from the top.
constexpr int kStrip = 60;
constexpr int kBaseline = 40;
// Antialiasing fringes fainter than this do not count as ink.
constexpr int kInk = 96;

struct Box {
  int x0 = 0, y0 = 0, x1 = -1, y1 = -1;  // inclusive; empty when x1 < x0
  bool empty() const { return x1 < x0; }
  void Add(int x, int y) {
    if (empty()) {
      x0 = x1 = x;
      y0 = y1 = y;
      return;
    }
    x0 = std::min(x0, x);
    x1 = std::max(x1, x);
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  }
};

double Attribute(const std::string& element, const std::string& name) {
  const std::regex re("\\s" + name + "=\"([-0-9.]+)\"");
  std::smatch m;
  return std::regex_search(element, m, re) ? std::stod(m[1].str()) : 0;
}

Box InkIn(const Image& image, int x0, int y0, int x1, int y1) {
  Box box;
  for (int y = std::max(0, y0); y < std::min(image.height, y1); ++y) {
    for (int x = std::max(0, x0); x < std::min(image.width, x1); ++x) {
      if (image.Alpha(x, y) >= kInk) box.Add(x, y);
    }
  }
  return box;
}

std::string Short(const std::string& text) {
  std::smatch m;
  static const std::regex kContent(">([^<]*)</text>");
  return std::regex_search(text, m, kContent) ? "\"" + m[1].str() + "\"" : text;
}

Image Render(const std::string& svg_path, const std::string& png_path,
             const std::vector<std::string>& extra, std::string* error) {
  std::vector<std::string> argv = {"rsvg-convert"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("-o");
  argv.push_back(png_path);
  argv.push_back(svg_path);
  const CommandResult r = RunProgram(argv);
  if (r.exit_code != 0) {
    *error = "rsvg-convert failed (" + std::to_string(r.exit_code) + "): " + r.err +
             (r.exit_code == 127 ? " (install librsvg2-bin: scripts/install-deps.sh)" : "");
    return Image();
  }
  std::string bytes;
  {
    std::ifstream in(png_path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    bytes = text.str();
  }
  return DecodePng(bytes, error);
}

}  // namespace

std::string RenderPng(const std::string& svg_path, const std::string& png_path) {
  std::string error;
  Render(svg_path, png_path, {}, &error);
  return error;
}

std::string SvgLayoutProblems(const std::string& svg, const std::string& scratch) {
  std::vector<std::string> problems;
  const size_t root_end = svg.find('>', svg.find("<svg"));
  const std::string root = svg.substr(svg.find("<svg"), root_end - svg.find("<svg") + 1);
  const int width = static_cast<int>(Attribute(root, "width"));
  const int height = static_cast<int>(Attribute(root, "height"));
  if (width <= 0 || height <= 0) return "no canvas size in the <svg> element";

  // 1. The whole plot on a page kMargin larger on every side.
  const std::string svg_path = scratch + "/plot.svg";
  WriteFile(svg_path, svg);
  std::string error;
  const Image page = Render(svg_path, scratch + "/page.png",
                            {"--page-width", std::to_string(width + 2 * kMargin), "--page-height",
                             std::to_string(height + 2 * kMargin), "--left",
                             std::to_string(kMargin), "--top", std::to_string(kMargin)},
                            &error);
  if (!error.empty()) return error;
  Box outside;
  for (int y = 0; y < page.height; ++y) {
    for (int x = 0; x < page.width; ++x) {
      const bool in_canvas =
          x >= kMargin && x < kMargin + width && y >= kMargin && y < kMargin + height;
      if (!in_canvas && page.Alpha(x, y) >= kInk) outside.Add(x - kMargin, y - kMargin);
    }
  }
  if (!outside.empty()) {
    problems.push_back(StrFormat("ink outside the %dx%d canvas, within x %d..%d, y %d..%d", width,
                                 height, outside.x0, outside.x1, outside.y0, outside.y1));
  }

  // 2. Every text alone, in a strip of its own (a rotated one gets the canvas's height).
  static const std::regex kText("<text[^>]*>[^<]*</text>");
  std::vector<std::string> texts;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kText); it != std::sregex_iterator();
       ++it) {
    texts.push_back(it->str());
  }
  const int strip_w = width + 2 * kMargin;
  std::vector<int> strip_top, strip_h, window_y;
  int total = 0;
  std::string strips;
  for (const std::string& t : texts) {
    const bool rotated = t.find("transform=") != std::string::npos;
    const int h = rotated ? height + 2 * kMargin : kStrip;
    const int wy = rotated ? -kMargin : static_cast<int>(Attribute(t, "y")) - kBaseline;
    strip_top.push_back(total);
    strip_h.push_back(h);
    window_y.push_back(wy);
    strips += StrFormat(
        "<svg x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" viewBox=\"%d %d %d %d\">%s</svg>\n",
        total, strip_w, h, -kMargin, wy, strip_w, h, t.c_str());
    total += h;
  }
  if (texts.empty()) return StrJoin(problems, "\n");
  // The strips inherit the plot's font from a root like the plot's own.
  std::string strip_root = root;
  strip_root = std::regex_replace(strip_root, std::regex("\\swidth=\"[^\"]*\""),
                                  StrFormat(" width=\"%d\"", strip_w));
  strip_root = std::regex_replace(strip_root, std::regex("\\sheight=\"[^\"]*\""),
                                  StrFormat(" height=\"%d\"", total));
  strip_root = std::regex_replace(strip_root, std::regex("\\sviewBox=\"[^\"]*\""),
                                  StrFormat(" viewBox=\"0 0 %d %d\"", strip_w, total));
  const std::string strips_path = scratch + "/texts.svg";
  WriteFile(strips_path, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + strip_root + "\n" +
                             strips + "</svg>\n");
  const Image image = Render(strips_path, scratch + "/texts.png", {}, &error);
  if (!error.empty()) return error;
  std::vector<Box> boxes;
  for (size_t i = 0; i < texts.size(); ++i) {
    Box b = InkIn(image, 0, strip_top[i], strip_w, strip_top[i] + strip_h[i]);
    if (!b.empty()) {
      // To canvas coordinates.
      b.x0 -= kMargin;
      b.x1 -= kMargin;
      b.y0 += window_y[i] - strip_top[i];
      b.y1 += window_y[i] - strip_top[i];
      if (b.x0 < 0 || b.y0 < 0 || b.x1 >= width || b.y1 >= height) {
        problems.push_back(StrFormat("text %s leaves the canvas (x %d..%d, y %d..%d of %dx%d)",
                                     Short(texts[i]).c_str(), b.x0, b.x1, b.y0, b.y1, width,
                                     height));
      }
    }
    boxes.push_back(b);
  }
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const Box& a = boxes[i];
      const Box& b = boxes[j];
      if (a.empty() || b.empty()) continue;
      if (a.x0 <= b.x1 && b.x0 <= a.x1 && a.y0 <= b.y1 && b.y0 <= a.y1) {
        problems.push_back(
            StrFormat("texts %s and %s overlap", Short(texts[i]).c_str(), Short(texts[j]).c_str()));
      }
    }
  }
  return StrJoin(problems, "\n");
}

}  // namespace libra::test
