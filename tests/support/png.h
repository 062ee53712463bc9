// A PNG reader for the plot layout tests: 8-bit RGB or RGBA, non-interlaced (what rsvg-convert
// writes), decoded with zlib. Only what the tests need; anything else is an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace libra::test {

struct Image {
  int width = 0;
  int height = 0;
  /// RGBA, row by row.
  std::vector<uint8_t> rgba;
  uint8_t Alpha(int x, int y) const { return rgba[(static_cast<size_t>(y) * width + x) * 4 + 3]; }
};

/// Decodes a PNG file's bytes; "" in `error` on success.
Image DecodePng(const std::string& bytes, std::string* error);

}  // namespace libra::test
