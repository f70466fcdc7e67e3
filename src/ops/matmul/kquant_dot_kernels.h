// SIMD dot products of an f32 activation row with weight rows stored as K-quant super-blocks
// (Q4_K, Q5_K, Q6_K: 256 values each, the GGUF layouts of platform/block_formats.h), reading the
// packed blocks directly. These are decode's kernels for GGUF files such as Q4_K_M (mostly Q4_K,
// some Q6_K) when the weights are not re-encoded with --weights, in place of scalar block dots
// that read far below the memory's rate. Compiled for several x86 targets with Highway and
// dispatched at run time on the CPU found; f32 math throughout (the activations are not quantized).
#pragma once
#include <cstddef>
#include <cstdint>

#include "platform/dtype.h"

namespace g4::ops {

// out[r] = Σ_i x[i] · w_r[i] for r < rows (1 <= rows <= 4), w_r = w + r * row_bytes, n values of
// `dtype` per row (dtype_is_kquant). Each x value is loaded once for all rows; per sub-block (32 values for Q4_K /
// Q5_K, 16 for Q6_K) the products are summed lane-wise in f32 and then scaled, so a row's sum is
// the same bits whatever `rows`. Returns false (nothing written) for other dtypes, n not a
// multiple of 256, or rows outside 1-4: the caller falls back to the scalar block dots.
bool dot_rows_kquant(const float* x, const std::byte* w, size_t row_bytes, DType dtype, size_t n, int rows, float* out);

}  // namespace g4::ops
