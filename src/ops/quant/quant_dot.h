// Dot products of an f32 activation vector with one weight row stored in any g4 dtype, reading
// the packed blocks directly (no dequantized copy of the row), and the matching quantizers.
// One file per block format in this folder (block_quant.h); each dot is tested against
// dequantize_row + f32 dot on random blocks (tests/ops).
#pragma once
#include <cstddef>
#include <cstdint>

#include "platform/dtype.h"
#include "platform/tensor_view.h"

namespace g4::ops {

// Σ_i x[i] · w[i] over n values stored as `t` at `row` (n a multiple of the block size).
// Accumulates in f32 per block, applying the block's scales once per (sub-)block.
float quant_dot(DType t, const std::byte* row, const float* x, int64_t n);

// Row r of a [rows, cols] (or leading-dims-flattened) weight dotted with x[cols].
float dot_row(const TensorView& w, int64_t r, const float* x);

// Quantizes n values (a multiple of the block size) into dst (row_bytes(t, n) bytes).
// Per-element types are narrowed (round to nearest even). Deterministic; a simple
// min/max (absmax for symmetric types) quantizer with scales rounded before the values are
// quantized, so dequantize(quantize(x)) has error at most about half a step per value.
// Q8_0 and Q4_0 run on AVX-512 where the CPU has it, bit-identical to the scalar code.
void quantize_row(DType t, const float* x, std::byte* dst, int64_t n);
// The same with the scalar code only: the reference the SIMD quantizers are tested against.
void quantize_row_scalar(DType t, const float* x, std::byte* dst, int64_t n);

}  // namespace g4::ops
