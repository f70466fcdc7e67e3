// The int8 weight products on aarch64: NEON SDOT (dotprod) for row-major Q8_0 and Q4_0 blocks x
// int8 activations (gemm_q8.h: q and scale, no optional layout). The interleaved R16 layouts and
// the K-quants have no NEON kernel yet (int8_kernel_reads says so; those weights stay row-major
// and take the f32 block dots).
//
// Per output: each block's 32 products summed exactly in int32 (two SDOTs into four lanes, the
// lanes added in int32), then acc += float(sum) · (d_w · d_x) with one fused multiply-add per
// block, blocks in order. A tile holds up to 4 rows (one f32 lane each) x up to 4 tokens, and a
// row missing from an edge tile repeats row 0 in its lane, so every output takes the same steps
// whatever its tile, batch or thread: bit-identical across them (tests/ops/gemm_q8_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/matmul/gemm_q8.h"
#include "platform/dtype.h"

namespace g4::ops {

// gemm_q8_rows on the NEON dotprod tier: rows [o_begin, o_end) of Q8_0 or Q4_0 weights w x every
// token of a, into y[t · ldy + o]. Throws g4::Error on any other dtype, and on non-aarch64 builds.
void gemm_q8_rows_neon(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                       float* y, int64_t ldy);

}  // namespace g4::ops
