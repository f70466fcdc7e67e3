// Weight products for K-quant weights (Q4_K, Q5_K, Q6_K: GGUF super-blocks of 256 values, read
// where they are mapped) against int8 activations on AVX512_VNNI (VPDPBUSD), the int8 path the
// dtype policy names for 4- to 6-bit checkpoints ("activations q8", as for Q8_0/Q4_0).
//
// Numerics: one activation block of 32 is one Q4_K / Q5_K sub-block (two Q6_K sub-blocks of 16),
// so each VPDPBUSD lane sums 4 exact int32 products of unsigned weight codes and int8 values; a
// lane is then scaled by (d·sc of its sub-block) × (its activation block's scale) and accumulated
// in f32. The codes' offsets are exact integer corrections: Q4_K / Q5_K subtract dmin·m times the
// activation block's sum (its scale × Σq, in f32); Q6_K's codes are stored +32, and 32·Σq over each
// lane's 4 values is subtracted in int32 before the conversion. The only error beyond the weights'
// own is the activation rounding, as for Q8_0/Q4_0 (gemm_q8.h). Every output is summed in the
// same order whatever T, its tile or its thread.
#pragma once
#include <cstdint>

#include "ops/matmul/gemm_q8.h"
#include "platform/dtype.h"
#include "platform/row_interleave.h"

namespace g4::ops {

// y[t * ldy + o] for o in [o_begin, o_end), t < a.T: Σ_i a[t, i] · w[o, i], w rows of `dtype`
// super-blocks (dtype_is_kquant; a.in values each, a multiple of 256), activations quantized with the row-tile
// layout (kQ8RowTiles). Requires gemm_q8_available(); throws g4::Error on a dtype it does not
// read, a width that is not whole super-blocks or activations without the row-tile layout.
void gemm_kquant_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy);

// How far ahead the interleaved K-quant decode kernels prefetch each weight stream: three
// quarters of a super-block column (one line per value vector read, spread over the reads). The
// 256-bit tiers always do; the AVX512_VNNI kernels only where the decode plan prefetches
// (DecodeStreaming::prefetch_bytes > 0), as the Q4_0 kernels do: on Zen 4, whose plan has none,
// the requests cost Q4_K ~25 points of its read pass, while the 256-bit Q6_K kernel, at about
// half the AVX-512 one's rate, read slower without them (docs/perf.md).
constexpr uint64_t kquant_decode_prefetch_bytes(uint64_t column_bytes) { return column_bytes / 4 * 3; }
// Where the plan prefetches nothing, the AVX512_VNNI Q6_K kernel still requests its stream into L2
// (PREFETCHT1), this far ahead: two super-block columns. On Zen 4, E2B-like Q6_K layers from memory
// (one thread, alternated) read 0.78-0.85 of the pass with it, 0.63-0.69 without; 1 column ahead
// 0.61-0.65, 3 columns 0.75-0.76; into L1 3/4 column ahead 0.66-0.70. Q4_K gained nothing from it
// (0.68-0.76 against 0.76-0.85 without).
constexpr uint64_t kQ6KL2PrefetchBytes = 2 * kQ6KColumnBytes;

// The same products for Q4_K_R16 / Q5_K_R16 / Q6_K_R16 (`dtype`: Q4_K / Q5_K / Q6_K rows interleaved 16 at a time,
// platform/row_interleave.h; o_begin and o_end multiples of 16): 16 rows per VPDPBUSD with one
// f32 lane per row, as the Q4_0_R16 kernels. Each sub-block's exact int32 sum is scaled (and for
// Q4_K / Q5_K its min term subtracted) in the order gemm_kquant_interleaved.cpp states, the same for
// decode (activations' q, scale, q4_start, q6_start) and prefill (T > 1: the token panels, kQ8Panels).
// `decode` chooses the streams side by side, and on AVX512_VNNI whether decode prefetches (not
// how far). Requires gemm_q8_available(); throws g4::Error on
// another dtype, rows that are not whole groups or a width that is not whole super-blocks.
void gemm_kquant_interleaved_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                                  int64_t o_end, float* y, int64_t ldy, DecodeStreaming decode);
// The checks both tiers' interleaved K-quant kernels run first: throws g4::Error naming the dtype,
// the input width or the row range when it is not Q4_K_R16 / Q5_K_R16 / Q6_K_R16, whole
// super-blocks of 256 and whole groups of 16 rows.
void check_kquant_interleaved_args(const Q8Activations& a, DType dtype, int64_t o_begin, int64_t o_end);

}  // namespace g4::ops
