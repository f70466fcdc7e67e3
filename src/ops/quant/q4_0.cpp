// Q4_0 (platform/block_formats.h): f16 d, 16 bytes of nibbles; x = (q − 8)·d. The quantizer
// takes the value of largest magnitude, with its sign, as −8·d, so that value is exact.
#include <algorithm>
#include <cmath>

#include "ops/quant/block_quant.h"

#if defined(__x86_64__)
#include "ops/quant/quantize_avx512-inl.h"
#endif

namespace g4::ops::quant {

using namespace q4_0;

float dot_q4_0(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / kBlockValues; ++k, b += kBlockBytes, x += kBlockValues) {
    const uint8_t* q = bytes(b + kQsAt);
    float s = 0;
    for (size_t j = 0; j < kQsBytes; ++j)
      s += float(int(q[j] & 0xF) - 8) * x[j] + float(int(q[j] >> 4) - 8) * x[j + kQsBytes];
    total += s * half_at(b + kDAt);
  }
  return total;
}

void quantize_q4_0_block(const float* x, std::byte* b) {
  float amax = 0, max = 0;  // max: the value of largest magnitude, with its sign
  for (int j = 0; j < kBlockValues; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = round_to_f16(max / -8.0f);
  const float id = d ? 1.0f / d : 0.0f;
  put_half(b + kDAt, d);
  for (size_t j = 0; j < kQsBytes; ++j) {
    const int q0 = std::clamp(nearest(x[j] * id) + 8, 0, 15);
    const int q1 = std::clamp(nearest(x[j + kQsBytes] * id) + 8, 0, 15);
    b[kQsAt + j] = std::byte(uint8_t(q0 | (q1 << 4)));
  }
}

void quantize_q4_0(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k) quantize_q4_0_block(x + kBlockValues * k, b + kBlockBytes * k);
}

#if defined(__x86_64__)
G4_TARGET_AVX512F_BW_VL void quantize_q4_0_avx512(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k, x += kBlockValues, b += kBlockBytes) {
    __m512 x0, x1;
    if (!load_finite(x, &x0, &x1)) {
      quantize_q4_0_block(x, b);
      continue;
    }
    const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    // The scalar loop keeps the first value of largest magnitude, with its sign (0 if none is > 0).
    float max = 0;
    if (amax > 0) {
      const __m512 m = _mm512_set1_ps(amax);
      const uint32_t at =
          uint32_t(_mm512_cmp_ps_mask(a0, m, _CMP_EQ_OQ)) | uint32_t(_mm512_cmp_ps_mask(a1, m, _CMP_EQ_OQ)) << 16;
      max = x[__builtin_ctz(at)];
    }
    const float d = round_to_f16(max / -8.0f);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b + kDAt, d);
    const __m512i q0 = _mm512_add_epi32(round_clamped(x0, id, -8, 7), _mm512_set1_epi32(8));
    const __m512i q1 = _mm512_add_epi32(round_clamped(x1, id, -8, 7), _mm512_set1_epi32(8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + kQsAt),
                     _mm512_cvtepi32_epi8(_mm512_or_si512(q0, _mm512_slli_epi32(q1, 4))));
  }
}
#endif

}  // namespace g4::ops::quant
