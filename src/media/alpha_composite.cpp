#include "media/alpha_composite.h"

namespace g4::media {

uint8_t composite_on_white(uint8_t c, uint8_t a) {
  if (a == 0) return 255;  // Pillow copies the destination pixel
  // Pillow's AlphaComposite.c with an opaque destination (dst.a = 255, dst.c = 255): 7 extra
  // bits of precision, divisions by 255 done as shifts with rounding.
  constexpr uint32_t kPrecisionBits = 7;
  const uint32_t blend = 255u * (255u - a);
  const uint32_t outa255 = a * 255u + blend;
  const uint32_t coef1 = a * 255u * 255u * (1u << kPrecisionBits) / outa255;
  const uint32_t coef2 = 255u * (1u << kPrecisionBits) - coef1;
  const uint32_t tmp = c * coef1 + 255u * coef2 + (0x80u << kPrecisionBits);
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kPrecisionBits);
}

RgbImage rgba_over_white(const uint8_t* rgba, int width, int height) {
  RgbImage out;
  out.width = width;
  out.height = height;
  const size_t n = static_cast<size_t>(width) * height;
  out.rgb.resize(n * 3);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t a = rgba[i * 4 + 3];
    for (int ch = 0; ch < 3; ++ch) out.rgb[i * 3 + ch] = composite_on_white(rgba[i * 4 + ch], a);
  }
  return out;
}

}  // namespace g4::media
