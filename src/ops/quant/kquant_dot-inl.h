// The scalar dot of Q4_K and Q5_K rows, which differ only in Q5_K's fifth bit per value (qh) and
// where the nibbles start. Include only from q4_k.cpp and q5_k.cpp.
#pragma once
#include "ops/quant/block_quant.h"

namespace g4::ops::quant {

// Per super-block: for each pair of sub-blocks (2c, 2c + 1) the codes' dots with x and the sums
// of x, then d·(sc·Σqx) − dmin·(m·Σx), the pairs in order.
template <bool kFifth>
float dot_k_quant(const std::byte* b, const float* x, int64_t n) {
  using namespace q4_k;  // Q5_K shares every constant used here but the two below
  constexpr size_t kBytes = kFifth ? q5_k::kBlockBytes : q4_k::kBlockBytes;
  constexpr size_t kNibblesAt = kFifth ? q5_k::kQsAt : q4_k::kQsAt;
  float total = 0;
  for (int64_t k = 0; k < n / kBlockValues; ++k, b += kBytes) {
    const float d = half_at(b + kDAt), dmin = half_at(b + kDminAt);
    const uint8_t* scales = bytes(b + kScalesAt);
    const uint8_t* qh = bytes(b + q5_k::kQhAt);  // read only for Q5_K
    const uint8_t* ql = bytes(b + kNibblesAt);
    for (int c = 0; c < kSubBlocks / 2; ++c, ql += kSubBlockValues, x += 2 * kSubBlockValues) {
      uint8_t sc0, m0, sc1, m1;
      kquant_scale_min(2 * c, scales, &sc0, &m0);
      kquant_scale_min(2 * c + 1, scales, &sc1, &m1);
      const int sh0 = 2 * c, sh1 = 2 * c + 1;
      float s0 = 0, s1 = 0, x0 = 0, x1 = 0;
      for (int l = 0; l < kSubBlockValues; ++l) {
        int q0 = ql[l] & 0xF, q1 = ql[l] >> 4;
        if constexpr (kFifth) {
          q0 |= ((qh[l] >> sh0) & 1) << 4;
          q1 |= ((qh[l] >> sh1) & 1) << 4;
        }
        s0 += float(q0) * x[l];
        s1 += float(q1) * x[l + kSubBlockValues];
        x0 += x[l];
        x1 += x[l + kSubBlockValues];
      }
      total += d * (float(sc0) * s0 + float(sc1) * s1) - dmin * (float(m0) * x0 + float(m1) * x1);
    }
  }
  return total;
}

}  // namespace g4::ops::quant
