// Per block format: the scalar quantizer (a row of n values, n a whole number of blocks) and the
// scalar dot of a packed row with f32 activations. One file per format (q8_0.cpp, ..., q6_k.cpp;
// per_element.cpp for F32/F16/BF16); the layouts and the decoders are platform/block_formats.h's.
// quant_dot.h dispatches on DType. Internal to src/ops.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "platform/block_formats.h"
#include "platform/dtype.h"

namespace g4::ops::quant {

inline float half_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}
inline void put_half(std::byte* p, float f) {
  const uint16_t h = f32_to_f16(f);
  std::memcpy(p, &h, 2);
}
inline const uint8_t* bytes(const std::byte* p) { return reinterpret_cast<const uint8_t*>(p); }

// The quantizers round with lrintf (nearest even in the default mode) and clamp, with scales
// rounded to f16 before the values are quantized.
inline int nearest(float v) { return int(std::lrintf(v)); }

void quantize_q8_0(const float* x, std::byte* b, int64_t n);
void quantize_q8_0_block(const float* x, std::byte* b);
float dot_q8_0(const std::byte* b, const float* x, int64_t n);

void quantize_q4_0(const float* x, std::byte* b, int64_t n);
void quantize_q4_0_block(const float* x, std::byte* b);
float dot_q4_0(const std::byte* b, const float* x, int64_t n);

void quantize_q4_1(const float* x, std::byte* b, int64_t n);
float dot_q4_1(const std::byte* b, const float* x, int64_t n);

// Q4_K / Q5_K share the fit of a super-block (8 sub-blocks of 32 with x ≈ d·sc_j·q − dmin·m_j,
// q in [0, levels]); Q5_K adds the fifth bits.
void quantize_k_super_block(const float* x, std::byte* b, int levels, bool five);
void quantize_q4_k(const float* x, std::byte* b, int64_t n);
float dot_q4_k(const std::byte* b, const float* x, int64_t n);

void quantize_q5_k(const float* x, std::byte* b, int64_t n);
float dot_q5_k(const std::byte* b, const float* x, int64_t n);

void quantize_q6_k(const float* x, std::byte* b, int64_t n);
float dot_q6_k(const std::byte* b, const float* x, int64_t n);

// F32 / F16 / BF16: narrowed (round to nearest even) and widened.
void quantize_per_element(DType t, const float* x, std::byte* dst, int64_t n);
float dot_per_element(DType t, const std::byte* b, const float* x, int64_t n);

#if defined(__x86_64__)
// Q8_0 and Q4_0 on AVX-512 (AVX512F/BW/VL confirmed by the caller), bit-identical to the scalar
// quantizers (tested): the block's scale is computed by the same scalar steps from the same
// maximum, and the values are rounded by VCVTPS2DQ, which rounds to nearest even as lrintf does
// in the default mode. A block holding a NaN or an infinity goes to the scalar code, whose
// comparisons define what such a block gives.
void quantize_q8_0_avx512(const float* x, std::byte* b, int64_t n);
void quantize_q4_0_avx512(const float* x, std::byte* b, int64_t n);
#endif

}  // namespace g4::ops::quant
