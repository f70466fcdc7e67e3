// Weight products in bf16 on AVX512_BF16 (VDPBF16PS): y[T, out] = bf16(x)[T, in] · W[out, in]ᵀ
// for BF16 weights, f32 accumulation. Used when the dtype policy resolves compute = bf16 (the
// CPU executes bf16 dot products natively and its self-test passed).
//
// Numerics: the activations are rounded to bf16 (round to nearest even) once per product; each
// output element is then summed in exactly the same order whatever the number of tokens, the
// tile it falls in or the thread that computes it, so batching and chunking cannot change a
// result. Tested against ref::matmul on the same bf16-rounded activations.
#pragma once
#include <cstddef>
#include <cstdint>

namespace g4::ops {

// True when this build has the kernel and the CPU confirmed AVX512_BF16 (probe + self-test).
bool gemm_bf16_available();

// xb[t * in + i] = bf16(x[t * in + i]), round to nearest even. Requires gemm_bf16_available().
void round_rows_to_bf16(const float* x, int64_t count, uint16_t* xb);

// y[t * ldy + o] for o in [o_begin, o_end), t in [0, T): Σ_i xb[t, i] · w[o, i] (w: [out, in] bf16).
// Requires gemm_bf16_available().
void gemm_bf16_rows(const uint16_t* xb, int64_t T, int64_t in, const uint16_t* w, int64_t o_begin, int64_t o_end,
                    float* y, int64_t ldy);

// The same product on BF16_R16 weights (platform/row_interleave.h; in even, o_begin and o_end
// multiples of 16, else g4::Error): one VDPBF16PS advances 16 rows by one value pair, the
// token's pair broadcast to every lane, and each row keeps one f32 lane, summed over the pairs
// in order (one chain per row and token: the same bits for any T, tile, row range or thread,
// though not the row-major kernel's bits, which sum 16 strided partial sums).
// Decode (T = 1) streams `side_by_side` groups at once (1, 2 or 4; independent chains, so the
// instruction latency hides behind the loads), each requested `prefetch_bytes` ahead with
// software prefetch (0: none); prefill runs panels of 8 tokens x 2 groups.
void gemm_bf16_interleaved_rows(const uint16_t* xb, int64_t T, int64_t in, const std::byte* w, int64_t o_begin,
                                int64_t o_end, float* y, int64_t ldy, int side_by_side, uint64_t prefetch_bytes = 0);

}  // namespace g4::ops
