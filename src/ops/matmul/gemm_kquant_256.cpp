// gemm_kquant_rows_256 (gemm_q8_avx2.h): the row-major Q4_K, Q5_K and Q6_K tiles of
// gemm_kquant_256-inl.h, compiled once for AVX2 and once for AVX-VNNI, and the walk of a product's
// rows and tokens over them.
#include <algorithm>
#include <string>

#include "ops/matmul/gemm_q8_avx2.h"
#include "platform/block_formats.h"
#include "platform/error.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"

namespace g4::ops {
namespace {

constexpr int64_t kSuperBlock = q4_k::kBlockValues;  // Q4_K, Q5_K and Q6_K alike

// Tiles of 2 rows x up to 3 tokens (12 registers accumulate; decode: 2 rows x 1). On a Zen 3 core,
// prefill at in = 2304 and 8192 ran 2-15% faster than 2 x 2 or 3 x 2; 1 x 4, 1 x 5 and 2 x 4 gained
// up to 8% at 2304 but lost 10-40% on Q6_K at 8192 (4-5 tokens' activations outgrow L1). Decode
// from DRAM ran ~8% faster on 2 rows than on 4.
constexpr int kRows = 2, kTokens = 3;

// One tier's tiles (gemm_kquant_256-inl.h): [Q4_K, Q5_K, Q6_K][rows - 1][tokens - 1].
struct KQuantRowTiles256 {
  RowTileFn tile[3][kRows][kTokens];
};

}  // namespace
}  // namespace g4::ops

#define G4_INT8_256_KERNELS "ops/matmul/gemm_kquant_256-inl.h"
#include "ops/isa/foreach_int8_tier_256.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

// The two tiers' tables, built at compile time.
constexpr KQuantRowTiles256 kAvx2 = avx2::tiles(), kAvxVnni = avx_vnni::tiles();

// Rows [o_begin, o_end) x tokens [0, T) in tiles, the tokens in blocks of 64 whose activations stay
// in L2 while every row tile meets them (as for_each_row_tile).
void rows_on(const KQuantRowTiles256& k, const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
             int64_t o_end, float* y, int64_t ldy) {
  constexpr int64_t kTokenBlock = 64;
  const int kind = dtype == DType::Q4_K ? 0 : dtype == DType::Q5_K ? 1 : 2;
  const uint64_t rb = row_bytes(dtype, a.in);
  for (int64_t t0 = 0; t0 < a.T; t0 += kTokenBlock) {
    const int64_t t1 = std::min(a.T, t0 + kTokenBlock);
    for (int64_t o = o_begin; o < o_end; o += kRows)
      for (int64_t t = t0; t < t1; t += kTokens) {
        const int r = int(std::min<int64_t>(kRows, o_end - o)), c = int(std::min<int64_t>(kTokens, t1 - t));
        k.tile[kind][r - 1][c - 1](w + uint64_t(o) * rb, rb, a, t, y + t * ldy + o, ldy);
      }
  }
}

}  // namespace

void gemm_kquant_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                          float* y, int64_t ldy, Int8Dot tier) {
  if (!dtype_is_kquant(dtype))
    throw Error("gemm_kquant_rows_256: " + std::string(dtype_name(dtype)) + " weights are not K-quant super-blocks");
  if (a.in % kSuperBlock)
    throw Error("gemm_kquant_rows_256: rows of " + std::to_string(a.in) + " values are not whole super-blocks of 256");
  if (!(a.layouts & kQ8RowTiles))
    throw Error("gemm_kquant_rows_256: " + std::string(dtype_name(dtype)) +
                " weights read the activations' row-tile scales, which quantize_activations was not asked for");
  if (tier == Int8Dot::Avx2) rows_on(kAvx2, a, w, dtype, o_begin, o_end, y, ldy);
  else if (tier == Int8Dot::AvxVnni) rows_on(kAvxVnni, a, w, dtype, o_begin, o_end, y, ldy);
  else
    throw Error("gemm_kquant_rows_256: " + std::string(int8_dot_name(tier)) +
                " is not a 256-bit int8 tier (avx2, avx-vnni)");
}

#else  // not x86-64: int8_kernel_tier() is None, so callers never get here

void gemm_kquant_rows_256(const Q8Activations&, const std::byte*, DType, int64_t, int64_t, float*, int64_t, Int8Dot) {
  throw Error("gemm_kquant_rows_256: not an x86-64 build");
}

#endif

}  // namespace g4::ops
