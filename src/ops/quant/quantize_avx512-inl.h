// The AVX-512 steps the Q8_0 and Q4_0 quantizers share (q8_0.cpp, q4_0.cpp). Include only from
// .cpp files, after platform/avx512_intrinsics.h, on x86-64.
#pragma once
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"

namespace g4::ops::quant {

// The block's two halves, or false when a value is not finite.
G4_TARGET_AVX512F_BW_VL inline bool load_finite(const float* x, __m512* x0, __m512* x1) {
  *x0 = _mm512_loadu_ps(x);
  *x1 = _mm512_loadu_ps(x + 16);
  const __m512 big = _mm512_set1_ps(3.4028235e38f);
  return !(_mm512_cmp_ps_mask(_mm512_abs_ps(*x0), big, _CMP_NLE_UQ) |
           _mm512_cmp_ps_mask(_mm512_abs_ps(*x1), big, _CMP_NLE_UQ));
}

// round(x · id) clamped to [lo, hi], as int32 lanes.
G4_TARGET_AVX512F_BW_VL inline __m512i round_clamped(__m512 x, float id, int lo, int hi) {
  const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(id)));
  return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

}  // namespace g4::ops::quant
