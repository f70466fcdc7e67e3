// The int8 weight products on aarch64: NEON SDOT (dotprod) for row-major Q8_0, Q4_0, Q4_K, Q5_K
// and Q6_K blocks x int8 activations (gemm_q8.h: q, scale and the starts, no optional layout). The
// interleaved R16 layouts have no NEON kernel (int8_kernel_reads says so; the weights stay
// row-major there).
//
// Per output: each block's 32 products summed exactly in int32 (two SDOTs into four lanes, the
// lanes added in int32), then acc += float(sum) · (d_w · d_x) with one fused multiply-add per
// block, blocks in order. A tile holds up to 4 rows (one f32 lane each) x up to 4 tokens, and a
// row missing from an edge tile repeats row 0 in its lane, so every output takes the same steps
// whatever its tile, batch or thread: bit-identical across them (tests/ops/gemm_q8_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/matmul/gemm_q8.h"
#include "platform/dtype.h"

namespace g4::ops {

#if defined(__aarch64__)
// The f16 at p (a block's scale), converted by the FPU: aarch64 has __fp16 natively.
inline float neon_f16_at(const std::byte* p) {
  __fp16 h;
  std::memcpy(&h, p, sizeof h);
  return float(h);
}
#endif

// gemm_q8_rows on the NEON dotprod tier: rows [o_begin, o_end) of Q8_0 or Q4_0 weights w x every
// token of a, into y[t · ldy + o]. Throws g4::Error on any other dtype, and on non-aarch64 builds.
void gemm_q8_rows_neon(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                       float* y, int64_t ldy);

// The same for row-major Q4_K, Q5_K and Q6_K super-blocks (gemm_kquant_neon.cpp): per sub-block
// exact int32 sums, then per 32-value activation block, in order, Q4_K/Q5_K's
// acc += (d·sc·x_scale)·Σ − (dmin·m·x_scale)·Σq and Q6_K's two sub-blocks of 16 each
// acc += (d·sc·x_scale)·(Σ − 32·Σq), with fused multiply-adds. Throws g4::Error on another dtype,
// a width that is not whole super-blocks, and on non-aarch64 builds.
void gemm_kquant_rows_neon(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                           float* y, int64_t ldy);

}  // namespace g4::ops
