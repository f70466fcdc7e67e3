// SIMD dot products of an f32 activation row with weight rows stored as F32, BF16 or F16,
// accumulated in f32. Compiled for several x86 targets with Highway and dispatched at run time
// on the CPU found (AVX-512, AVX2+FMA+F16C, SSE4, scalar).
#pragma once
#include <cstddef>
#include <cstdint>

#include "platform/dtype.h"

namespace g4::ops {

inline constexpr int kMaxDotRows = 8;

// out[r] = Σ_i x[i] · w_r[i] for r < rows (1 <= rows <= kMaxDotRows; throws g4::Error otherwise),
// w_r = w + r * row_stride elements of `dtype`. Each row's sum is the same bits whatever `rows`.
// prefetch_bytes > 0: each row's bytes that far ahead are requested with software prefetch.
void dot_rows(const float* x, const void* w, DType dtype, size_t n, size_t row_stride, int rows, float* out,
              size_t prefetch_bytes = 0);

// Σ_i x[i] · w[i] for one row of Q8_0 or Q4_0 blocks (32 values each, f16 scale), without
// materialising the dequantized row. Returns false for other dtypes (caller falls back).
bool dot_row_blocks(const float* x, const std::byte* row, DType dtype, size_t n, float* out);

// out[r] for r < rows (<= 4): the same product for consecutive rows w + r * row_bytes, sharing
// each load of x. Returns false for other dtypes or n % 32 != 0 (caller falls back).
bool dot_rows_blocks(const float* x, const std::byte* w, size_t row_bytes, DType dtype, size_t n, int rows, float* out);

// y[t * ldy + r] = x_t . w_r for t < T, r < rows: activations x [T, n] (contiguous) and f32
// weight rows w_r = w + r * ldw (ldw >= n; 64-byte-aligned rows load fastest). Each product is
// bit-identical to dot_rows on the same row (and on its bf16/f16 original, since widening is
// exact), however T and rows are cut.
void dot_panel(const float* x, size_t T, size_t n, const float* w, size_t ldw, size_t rows, float* y, size_t ldy);

// dst[i] = f32(src[i]) for a row stored as `dtype`.
void widen_row(const void* src, DType dtype, size_t n, float* dst);

// The Highway target the dispatcher picked on this CPU (for g4 info / bench).
const char* dot_kernel_target();

}  // namespace g4::ops
