// Q4_K (platform/block_formats.h): super-blocks of 256 values, 8 sub-blocks of 32 with 6-bit
// scales and mins; x = d·sc_j·q − dmin·m_j, q in 0..15. The fit of a super-block is shared with
// Q5_K (q in 0..31, the fifth bits stored apart).
#include <algorithm>
#include <cmath>

#include "ops/quant/block_quant.h"
#include "ops/quant/kquant_dot-inl.h"

namespace g4::ops::quant {

float dot_q4_k(const std::byte* b, const float* x, int64_t n) { return dot_k_quant<false>(b, x, n); }

namespace {

// Each sub-block's scale and min (x ≈ sc·q − m over q in [0, levels]) quantized to 6 bits
// against the super-block's d and dmin, which are returned.
void fit_sub_blocks(const float* x, int levels, uint8_t sc[8], uint8_t m[8], float* d, float* dmin) {
  constexpr int kSub = q4_k::kSubBlockValues;
  float scale[8], minv[8];
  for (int j = 0; j < 8; ++j) {
    float mn = 0, mx = 0;  // the min is clamped to <= 0 (m_j >= 0), as ggml does
    for (int l = 0; l < kSub; ++l) {
      mn = std::min(mn, x[kSub * j + l]);
      mx = std::max(mx, x[kSub * j + l]);
    }
    scale[j] = (mx - mn) / float(levels);
    minv[j] = -mn;
  }
  const float max_scale = *std::max_element(scale, scale + 8), max_min = *std::max_element(minv, minv + 8);
  *d = round_to_f16(max_scale / 63.0f);
  *dmin = round_to_f16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    sc[j] = uint8_t(*d ? std::clamp(nearest(scale[j] / *d), 0, 63) : 0);
    m[j] = uint8_t(*dmin ? std::clamp(nearest(minv[j] / *dmin), 0, 63) : 0);
  }
}

// The inverse of kquant_scale_min: 8 scales and mins into the 12 scale bytes.
void pack_scales_mins(const uint8_t sc[8], const uint8_t m[8], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = uint8_t((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

}  // namespace

void quantize_k_super_block(const float* x, std::byte* b, int levels, bool five) {
  constexpr int kSub = q4_k::kSubBlockValues;
  uint8_t sc[8], m[8];
  float d, dmin;
  fit_sub_blocks(x, levels, sc, m, &d, &dmin);
  put_half(b + q4_k::kDAt, d);
  put_half(b + q4_k::kDminAt, dmin);
  pack_scales_mins(sc, m, reinterpret_cast<uint8_t*>(b + q4_k::kScalesAt));
  uint8_t q[q4_k::kBlockValues];
  for (int j = 0; j < 8; ++j) {
    const float dj = d * float(sc[j]), mj = dmin * float(m[j]);
    const float id = dj ? 1.0f / dj : 0.0f;
    for (int l = 0; l < kSub; ++l)
      q[kSub * j + l] = uint8_t(std::clamp(nearest((x[kSub * j + l] + mj) * id), 0, levels));
  }
  uint8_t* qh = five ? reinterpret_cast<uint8_t*>(b + q5_k::kQhAt) : nullptr;
  uint8_t* ql = reinterpret_cast<uint8_t*>(b + (five ? q5_k::kQsAt : q4_k::kQsAt));
  if (qh) std::memset(qh, 0, q5_k::kQhBytes);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < kSub; ++l) {
      const uint8_t lo = q[2 * kSub * c + l], hi = q[2 * kSub * c + kSub + l];
      ql[kSub * c + l] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
      if (qh) qh[l] = uint8_t(qh[l] | (((lo >> 4) & 1) << (2 * c)) | (((hi >> 4) & 1) << (2 * c + 1)));
    }
}

void quantize_q4_k(const float* x, std::byte* b, int64_t n) {
  using namespace q4_k;
  for (int64_t k = 0; k < n / kBlockValues; ++k)
    quantize_k_super_block(x + k * kBlockValues, b + k * kBlockBytes, 15, false);
}

}  // namespace g4::ops::quant
