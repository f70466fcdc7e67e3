// The int8 weight products on 256-bit vectors, for CPUs without AVX-512: AVX2 (VPMADDUBSW then
// VPMADDWD: u8 x s8 pairs summed in int16, pairs of those in int32) and AVX-VNNI (the VEX
// VPDPBUSD, one instruction for the same quad sums). Same layouts, same activations and, per
// output, the same f32 steps in the same order as the AVX512_VNNI kernels (gemm_q8.h,
// gemm_kquant.h): a 16-row group is two 8-row halves, each lane one row, so each output's int32
// block sums are the same exact integers and its bits do not depend on batch, tile or thread.
//
// No int16 sum can saturate: VPMADDUBSW adds two u8 x s8 products. Q4 codes (0..15) and the
// K-quants' codes (0..63) times |q| <= 127 (activations are quantized to -127..127) stay far below
// 32767 even summed over several pairs; Q8_0's offset-binary bytes (0..255) would not (2 x 255 x
// 127), so the AVX2 tier reads them back as signed weights and multiplies |w| by q with w's sign
// (2 x 128 x 127 = 32512), its block sums starting at 0 instead of −128·Σq: the same integer.
#pragma once
#include <cstdint>

#include "ops/matmul/gemm_q8.h"
#include "platform/device.h"
#include "platform/dtype.h"

namespace g4::ops {

// gemm_q8_rows on `tier` (Int8Dot::Avx2 or Int8Dot::AvxVnni) for Q8_0, Q4_0 (row-major tiles) and
// Q8_0_R16, Q4_0_R16 (decode, a few streams, prefill panels); arguments as gemm_q8_rows, whose
// checks of shape and layouts have passed.
void gemm_q8_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy, DecodeStreaming decode, Int8Dot tier);

// gemm_kquant_interleaved_rows on `tier` (Int8Dot::Avx2 or Int8Dot::AvxVnni): Q4_K_R16, Q5_K_R16,
// Q6_K_R16, decode and prefill, the same sums and f32 steps per output as the AVX-512 kernel.
void gemm_kquant_interleaved_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                                      int64_t o_end, float* y, int64_t ldy, DecodeStreaming decode, Int8Dot tier);

// gemm_kquant_rows on `tier` (Int8Dot::Avx2 or Int8Dot::AvxVnni): row-major Q4_K, Q5_K, Q6_K
// super-blocks (read where they are mapped) x int8 activations with the row-tile layout.
void gemm_kquant_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                          float* y, int64_t ldy, Int8Dot tier);

}  // namespace g4::ops
