// Which family of kernels a weight dtype falls in, and the decode constants both the product
// (matmul.cpp) and its description (matmul_plan.cpp) use. Internal to src/ops/matmul.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ops/matmul/dot_kernels.h"  // kMaxDotRows
#include "ops/matmul/gemm_bf16_256.h"
#include "ops/matmul/matmul.h"
#include "platform/dtype.h"
#include "platform/row_interleave.h"

namespace g4::ops::matmul_kinds {

// Rows in a prefill panel at most (the panel plan's largest candidate).
constexpr int64_t kMaxPanelRows = 64;

// Decode on BF16_R16: 16-row groups side by side per thread (one accumulator chain per group;
// side by side they share each activation load and hide VDPBF16PS's latency; 4 measured best).
constexpr int kBf16DecodeGroups = 4;

// Decode on BF16_R16 with f32 activations (gemm_bf16_256.h): the decode plan's groups side by
// side for a group of `group_bytes`, at most kBf16Decode256Groups (4 accumulators a group).
inline int bf16_256_decode_groups(const MatmulContext& ctx, uint64_t group_bytes) {
  return std::clamp(decode_groups_for(ctx.decode, group_bytes), 1, kBf16Decode256Groups);
}

// Per-element types the float kernels widen in registers.
inline bool simd_dtype(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
// Row-major block types with their own SIMD block dots.
inline bool simd_blocks(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }
// Row-major block types the int8 kernel reads (gemm_q8_rows): Q8_0, Q4_0 and the K-quants.
inline bool int8_blocks(DType t) { return simd_blocks(t) || dtype_is_kquant(t); }
// Row-major block types without the Q8_0/Q4_0 kernels (Q4_1, Q4_K, Q5_K, Q6_K): decode runs the
// SIMD K-quant dots (kquant_dot_kernels.h) or, for Q4_1, the scalar block dots (quant_dot, the
// reference's own), split over the threads; prefill takes the same dequantize-once path as
// Q8_0/Q4_0.
inline bool other_blocks(DType t) { return dtype_is_quantized(t) && !simd_blocks(t) && !dtype_is_interleaved(t); }

// Rows per dot_rows call when decode runs the float kernels: one weight stream per row, 4, or
// as many more as ctx.decode plans (up to kMaxDotRows).
inline int float_decode_rows(const MatmulContext& ctx) {
  return std::min(kMaxDotRows, std::clamp(ctx.panel_rows, 1, 4) * std::max(1, ctx.decode.groups));
}

}  // namespace g4::ops::matmul_kinds
