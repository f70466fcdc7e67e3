// Q8_0 (platform/block_formats.h): f16 d, int8 q[32]; x = q·d. The symmetric quantizer: d =
// max|x| / 127, q = round(x / d).
#include <algorithm>
#include <cmath>

#include "ops/quant/block_quant.h"

#if defined(__x86_64__)
#include "ops/quant/quantize_avx512-inl.h"
#endif

namespace g4::ops::quant {

using namespace q8_0;

float dot_q8_0(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / kBlockValues; ++k, b += kBlockBytes, x += kBlockValues) {
    const int8_t* q = reinterpret_cast<const int8_t*>(b + kQsAt);
    float s = 0;
    for (int j = 0; j < kBlockValues; ++j) s += float(q[j]) * x[j];
    total += s * half_at(b + kDAt);
  }
  return total;
}

void quantize_q8_0_block(const float* x, std::byte* b) {
  float amax = 0;
  for (int j = 0; j < kBlockValues; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = round_to_f16(amax / 127.0f);
  const float id = d ? 1.0f / d : 0.0f;
  put_half(b + kDAt, d);
  for (int j = 0; j < kBlockValues; ++j)
    b[kQsAt + j] = std::byte(uint8_t(int8_t(std::clamp(nearest(x[j] * id), -127, 127))));
}

void quantize_q8_0(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k) quantize_q8_0_block(x + kBlockValues * k, b + kBlockBytes * k);
}

#if defined(__x86_64__)
G4_TARGET_AVX512F_BW_VL void quantize_q8_0_avx512(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k, x += kBlockValues, b += kBlockBytes) {
    __m512 x0, x1;
    if (!load_finite(x, &x0, &x1)) {
      quantize_q8_0_block(x, b);
      continue;
    }
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float d = round_to_f16(amax / 127.0f);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b + kDAt, d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + kQsAt), _mm512_cvtepi32_epi8(round_clamped(x0, id, -127, 127)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + kQsAt + 16),
                     _mm512_cvtepi32_epi8(round_clamped(x1, id, -127, 127)));
  }
}
#endif

}  // namespace g4::ops::quant
