// BF16_R16 weight products on AVX2 + FMA, for CPUs without AVX512_BF16 where compute stays f32:
// y[T, out] = x[T, in] · W[out, in]ᵀ with the f32 activations as they are (not rounded), the bf16
// weights widened to f32 in registers (exactly: a bf16 is the top half of its f32) and f32 FMA
// accumulation. The row-major alternative (dot_kernels) widens whole rows into a panel and ends
// every row and token in a horizontal sum; here 8 rows share each register and the activation
// pair each step.
//
// A 32-byte half of a BF16_R16 vector (platform/row_interleave.h) holds rows 0-7 (or 8-15) as
// 16-bit pairs (value 2p, value 2p + 1). Unpacked with zero below each word (VPUNPCKLWD /
// VPUNPCKHWD work within each 128-bit lane), it becomes two registers of f32 lanes
// [r0e r0o r1e r1o | r4e r4o r5e r5o] and [r2e r2o r3e r3o | r6e r6o r7e r7o], multiplied by the
// activation pair (x[2p], x[2p + 1]) broadcast as one 64-bit value. Numerics: each output is two
// f32 FMA chains, over the even values and over the odd values in order, then even + odd
// (VHADDPS, which also puts rows 0-7 back in order). Decode and prefill run exactly these
// operations, so a token's result is the same bits alone or in any batch, tile, row range or
// thread; it is not the row-major kernel's bits (another summation order).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

namespace g4::ops {

// True when the CPU can run this kernel: an x86-64 build, AVX2, FMA and F16C confirmed by the probe.
bool gemm_bf16_256_supported();

// True when ops::matmul takes BF16_R16 products without the bf16 kernel (compute f32, or no
// AVX512_BF16) here, so BF16 matrices are worth interleaving: supported, and no usable AVX-512
// (there the row-major BF16 weights keep the AVX-512 f32 kernels of dot_kernels, unchanged), or
// forced by force_gemm_bf16_256.
bool gemm_bf16_256_available();

// Tests and benchmarks: take this kernel (true) or not (false) from now on, whatever the CPU's
// AVX-512; nullopt: as the CPU says. Throws g4::Error for true where it is not supported. Not
// while products run.
void force_gemm_bf16_256(std::optional<bool> on);

// Tokens per prefill tile: one 8-row half x kBf16Tile256Tokens tokens, 2 accumulators a token.
inline constexpr int kBf16Tile256Tokens = 6;
// Most 16-row groups a one-token product streams side by side (4 accumulators each).
inline constexpr int kBf16Decode256Groups = 2;

// y[t * ldy + o] for o in [o_begin, o_end), t in [0, T): Σ_i x[t * in + i] · w[o, i], w BF16_R16
// (in even, o_begin and o_end multiples of 16, else g4::Error). Decode (T = 1) streams
// min(side_by_side, 2) groups at once, each requesting its bytes `prefetch_bytes` ahead (0: no
// software prefetch); prefill runs tiles of 8 rows x 6 tokens in blocks of 96 tokens.
// Requires gemm_bf16_256_supported().
void gemm_bf16_256_rows(const float* x, int64_t T, int64_t in, const std::byte* w, int64_t o_begin, int64_t o_end,
                        float* y, int64_t ldy, int side_by_side, uint64_t prefetch_bytes = 0);

}  // namespace g4::ops
