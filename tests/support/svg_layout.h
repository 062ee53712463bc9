// Layout checks of libra's SVG plots, on what librsvg actually draws (rsvg-convert from Debian's
// librsvg2-bin, with the system's fonts) rather than on libra's own text-width estimates:
//   * nothing is drawn outside the canvas;
//   * every text lies inside the canvas;
//   * no two texts overlap.
// Each text is rendered alone (all of them in one rsvg-convert call, one strip per text) and its
// ink's bounding box measured; the whole plot is rendered once on a larger page to find ink
// outside the canvas.
#pragma once

#include <string>
#include <vector>

namespace libra::test {

/// The problems of `svg`'s layout, one per line ("" when there are none); `scratch` is a folder
/// for the renders. A failure to render is a problem too.
std::string SvgLayoutProblems(const std::string& svg, const std::string& scratch);

/// Renders `svg` to a PNG at `png` (rsvg-convert); "" or what went wrong.
std::string RenderPng(const std::string& svg_path, const std::string& png_path);

}  // namespace libra::test
