#include "platform/quantize_int8.h"

#include <algorithm>
#include <cmath>

#include "platform/device.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#endif

namespace g4 {

float quantize_int8_symmetric_scalar(const float* x, int64_t n, int8_t* q) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n; ++i) q[i] = int8_t(std::lrint(std::clamp(x[i] * inv, -127.0f, 127.0f)));
  return scale;
}

namespace {

#if defined(__x86_64__)
// Why a vector path: the attention kernel quantizes its G query rows on every call (one call per
// slice of 256 keys), and the scalar loop (lrint per value) cost more than the int8 products it
// fed saved.
G4_TARGET_AVX512F_BW_VL float quantize_avx512(const float* x, int64_t n, int8_t* q) {
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + i));
    m = _mm512_max_ps(a, m);  // max(a, m): a NaN in x is passed over, as std::max(amax, |x|) does
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float amax = 0;
  for (float v : lanes) amax = std::max(amax, v);
  const float scale = amax / 127.0f;
  const __m512 inv = _mm512_set1_ps(scale > 0 ? 1.0f / scale : 0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    // clamp, then round to nearest even (the MXCSR default, as lrint): the scalar loop's order.
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv), lo), hi);
    _mm_mask_storeu_epi8(q + i, k, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  return scale;
}
#endif

[[maybe_unused]] bool use_avx512() {
#if defined(__x86_64__)
  static const bool ok = host_cpu().avx512_usable();
  return ok;
#else
  return false;
#endif
}

}  // namespace

float quantize_int8_symmetric(const float* x, int64_t n, int8_t* q) {
#if defined(__x86_64__)
  if (use_avx512()) return quantize_avx512(x, n, q);
#endif
  return quantize_int8_symmetric_scalar(x, n, q);
}

}  // namespace g4
