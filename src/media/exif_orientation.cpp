#include "media/exif_orientation.h"

#include <cstring>

namespace g4::media {

namespace {

// Reads the TIFF structure inside the payload; every access is bounds-checked.
struct TiffReader {
  std::span<const uint8_t> b;
  bool little = true;
  bool ok = true;

  uint32_t u16(size_t at) {
    if (at + 2 > b.size()) {
      ok = false;
      return 0;
    }
    return little ? (b[at] | b[at + 1] << 8) : (b[at] << 8 | b[at + 1]);
  }
  uint32_t u32(size_t at) {
    if (at + 4 > b.size()) {
      ok = false;
      return 0;
    }
    const uint32_t lo = u16(at), hi = u16(at + 2);
    return little ? (lo | hi << 16) : (lo << 16 | hi);
  }
};

}  // namespace

int exif_orientation(std::span<const uint8_t> app1) {
  if (app1.size() < 6 || std::memcmp(app1.data(), "Exif\0\0", 6) != 0) return 1;
  TiffReader t{app1.subspan(6)};
  if (t.b.size() < 8) return 1;
  if (t.b[0] == 'I' && t.b[1] == 'I') t.little = true;
  else if (t.b[0] == 'M' && t.b[1] == 'M') t.little = false;
  else return 1;
  if (t.u16(2) != 42) return 1;
  const size_t ifd = t.u32(4);
  const uint32_t entries = t.u16(ifd);
  if (!t.ok) return 1;
  for (uint32_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + size_t{12} * i;
    const uint32_t tag = t.u16(e), type = t.u16(e + 2);
    if (!t.ok) return 1;
    if (tag != 0x0112) continue;
    // SHORT (type 3), count 1: the value sits in the first two bytes of the value field.
    const uint32_t v = type == 3 ? t.u16(e + 8) : 0;
    return t.ok && v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

RgbImage apply_exif_orientation(const RgbImage& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int w = in.width, h = in.height;
  const bool swap = orientation >= 5;
  RgbImage out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.rgb.resize(in.rgb.size());
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // the source pixel that lands on (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = h - 1 - x; break;
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;
        case 8: sx = w - 1 - y; sy = x; break;
      }
      std::memcpy(&out.rgb[(static_cast<size_t>(y) * out.width + x) * 3], in.pixel(sx, sy), 3);
    }
  }
  return out;
}

}  // namespace g4::media
