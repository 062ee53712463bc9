#include "support/png.h"

#include <zlib.h>

#include <cstdlib>

namespace libra::test {
namespace {

uint32_t BigEndian(const std::string& bytes, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3]));
}

uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a);
  const int pb = std::abs(p - b);
  const int pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

}  // namespace

Image DecodePng(const std::string& bytes, std::string* error) {
  Image image;
  *error = "";
  if (bytes.size() < 8 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    *error = "not a PNG";
    return image;
  }
  int color_type = -1;
  std::string compressed;
  for (size_t at = 8; at + 8 <= bytes.size();) {
    const uint32_t length = BigEndian(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + length > bytes.size()) {
      *error = "truncated chunk " + type;
      return image;
    }
    if (type == "IHDR") {
      image.width = static_cast<int>(BigEndian(bytes, at + 8));
      image.height = static_cast<int>(BigEndian(bytes, at + 12));
      const int depth = static_cast<uint8_t>(bytes[at + 16]);
      color_type = static_cast<uint8_t>(bytes[at + 17]);
      const int interlace = static_cast<uint8_t>(bytes[at + 20]);
      if (depth != 8 || (color_type != 6 && color_type != 2) || interlace != 0) {
        *error = "unsupported PNG (depth, colour type or interlace)";
        return image;
      }
    } else if (type == "IDAT") {
      compressed += bytes.substr(at + 8, length);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + length;
  }
  const int channels = color_type == 6 ? 4 : 3;
  const size_t stride = static_cast<size_t>(image.width) * channels;
  std::string raw((stride + 1) * static_cast<size_t>(image.height), '\0');
  uLongf raw_size = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                 reinterpret_cast<const Bytef*>(compressed.data()), compressed.size()) != Z_OK ||
      raw_size != raw.size()) {
    *error = "bad image data";
    return image;
  }
  std::vector<uint8_t> pixels(stride * static_cast<size_t>(image.height));
  for (int y = 0; y < image.height; ++y) {
    const uint8_t filter = static_cast<uint8_t>(raw[static_cast<size_t>(y) * (stride + 1)]);
    const uint8_t* in = reinterpret_cast<const uint8_t*>(raw.data()) + y * (stride + 1) + 1;
    uint8_t* out = pixels.data() + y * stride;
    const uint8_t* up = y > 0 ? out - stride : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? out[i - channels] : 0;
      const int b = up != nullptr ? up[i] : 0;
      const int c = up != nullptr && i >= static_cast<size_t>(channels) ? up[i - channels] : 0;
      int v = in[i];
      switch (filter) {
        case 0:
          break;
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4:
          v += Paeth(a, b, c);
          break;
        default:
          *error = "bad filter type";
          return image;
      }
      out[i] = static_cast<uint8_t>(v);
    }
  }
  image.rgba.resize(static_cast<size_t>(image.width) * image.height * 4);
  for (size_t p = 0; p < static_cast<size_t>(image.width) * image.height; ++p) {
    for (int k = 0; k < 3; ++k) image.rgba[p * 4 + k] = pixels[p * channels + k];
    image.rgba[p * 4 + 3] = channels == 4 ? pixels[p * 4 + 3] : 255;
  }
  return image;
}

}  // namespace libra::test
