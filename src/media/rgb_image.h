// RgbImage: decoded pixels as the image processor takes them, 8 bits per channel, no alpha
// (alpha is composited on white while decoding, see alpha_composite.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace g4::media {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3], row-major, channel fastest

  const uint8_t* pixel(int x, int y) const { return &rgb[(static_cast<std::size_t>(y) * width + x) * 3]; }
};

}  // namespace g4::media
