// Q4_1 (platform/block_formats.h): f16 d, f16 m, 16 bytes of nibbles; x = q·d + m. The
// quantizer maps [min, max] of the block onto 0..15.
#include <algorithm>
#include <cmath>

#include "ops/quant/block_quant.h"

namespace g4::ops::quant {

using namespace q4_1;

float dot_q4_1(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / kBlockValues; ++k, b += kBlockBytes, x += kBlockValues) {
    const uint8_t* q = bytes(b + kQsAt);
    float s = 0, sx = 0;
    for (size_t j = 0; j < kQsBytes; ++j) {
      s += float(q[j] & 0xF) * x[j] + float(q[j] >> 4) * x[j + kQsBytes];
      sx += x[j] + x[j + kQsBytes];
    }
    total += s * half_at(b + kDAt) + sx * half_at(b + kMAt);
  }
  return total;
}

void quantize_q4_1(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k, x += kBlockValues, b += kBlockBytes) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < kBlockValues; ++j) {
      mn = std::min(mn, x[j]);
      mx = std::max(mx, x[j]);
    }
    const float d = round_to_f16((mx - mn) / 15.0f);
    const float m = round_to_f16(mn);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b + kDAt, d);
    put_half(b + kMAt, m);
    for (size_t j = 0; j < kQsBytes; ++j) {
      const int q0 = std::clamp(nearest((x[j] - m) * id), 0, 15);
      const int q1 = std::clamp(nearest((x[j + kQsBytes] - m) * id), 0, 15);
      b[kQsAt + j] = std::byte(uint8_t(q0 | (q1 << 4)));
    }
  }
}

}  // namespace g4::ops::quant
