// gemm_q8_rows_256 (gemm_q8_avx2.h): the 256-bit int8 kernels of gemm_q8_256-inl.h, compiled once
// for AVX2 and once for AVX-VNNI, and how a product's rows and tokens are walked over them.
#include <cstring>
#include <iterator>
#include <string>

#include "ops/matmul/gemm_q8_avx2.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "ops/isa/x86_lanes.h"
#include "platform/target_attributes.h"

namespace g4::ops {
// One tier's kernels (gemm_q8_256-inl.h) as function pointers, so the walk below is written once.
struct Kernels256 {
  using Decode = void (*)(const std::byte*, uint64_t group_bytes, const Q8Activations&, float* y, uint64_t prefetch);
  // One group x n tokens from t0 (n = index + 1, 1..8; the token panels' layout), prefetching
  // `prefetch` bytes ahead but never past `end`.
  using Tokens = void (*)(const std::byte* group, const std::byte* end, const Q8Activations& a, int64_t t0, float* y,
                          int64_t ldy, uint64_t prefetch);
  // Prefill: one group x the panel of tokens from t (a panel's start), `count` of them real.
  using Panel = void (*)(const std::byte* group, const Q8Activations& a, int64_t t, float* y, int64_t ldy, int count);
  Decode decode[3];  // 1, 2, 4 groups side by side
  Tokens tokens[kFewTokens];
  Panel panel;
  RowTileFn row[2][4];  // row-major tiles: [rows - 1][tokens - 1]
};
}  // namespace g4::ops

#define G4_INT8_256_KERNELS "ops/matmul/gemm_q8_256-inl.h"
#include "ops/isa/foreach_int8_tier_256.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

const Kernels256& kernels_for(Int8Dot tier, bool q4) {
  static const Kernels256 kAvx2[2] = {avx2::kernels<false>(), avx2::kernels<true>()};
  static const Kernels256 kVnni[2] = {avx_vnni::kernels<false>(), avx_vnni::kernels<true>()};
  return (tier == Int8Dot::AvxVnni ? kVnni : kAvx2)[q4 ? 1 : 0];
}

// Q8_0_R16 / Q4_0_R16 groups [o_begin/16, o_end/16): decode as streams of 1, 2 or 4 groups side by
// side (the plan's), a few tokens in one pass per group, prefill in panels of kPanelTokens.
void interleaved_256(const Kernels256& k, const Q8Activations& a, const std::byte* w, bool q4, int64_t o_begin,
                     int64_t o_end, float* y, int64_t ldy, const DecodeStreaming& decode) {
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(q4 ? DType::Q4_0 : DType::Q8_0, a.in);
  const int64_t g_begin = o_begin / kInterleaveRows, g_end = o_end / kInterleaveRows;
  const std::byte* end = w + uint64_t(g_end) * group_bytes;
  if (a.T > 1 && a.T <= kFewTokens) {
    for (int64_t g = g_begin; g < g_end; ++g)
      k.tokens[a.T - 1](w + uint64_t(g) * group_bytes, end, a, 0, y + g * kInterleaveRows, ldy,
                        decode.few_prefetch_bytes);
    return;
  }
  walk_interleaved_groups(
      a.T, g_begin, g_end, decode_groups_for(decode, group_bytes),
      [&](int n, int64_t g) {
        k.decode[n == 4 ? 2 : n == 2 ? 1 : 0](w + uint64_t(g) * group_bytes, group_bytes, a, y + g * kInterleaveRows,
                                              decode.prefetch_bytes);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        for (int64_t i = 0; i < (pair ? 2 : 1); ++i)
          k.panel(w + uint64_t(g + i) * group_bytes, a, t, y + t * ldy + (g + i) * kInterleaveRows, ldy, count);
      });
}

}  // namespace

void gemm_q8_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy, DecodeStreaming decode, Int8Dot tier) {
  if (tier != Int8Dot::Avx2 && tier != Int8Dot::AvxVnni)
    throw Error("gemm_q8_rows_256: the 256-bit kernels run on avx2 or avx-vnni, not " + std::string(int8_dot_name(tier)));
  const bool q4 = dtype == DType::Q4_0 || dtype == DType::Q4_0_R16;
  if (!q4 && dtype != DType::Q8_0 && dtype != DType::Q8_0_R16)
    throw Error("gemm_q8_rows_256: " + std::string(dtype_name(dtype)) + " weights are not Q8_0 or Q4_0 blocks");
  const Kernels256& k = kernels_for(tier, q4);
  if (dtype_is_interleaved(dtype)) {
    interleaved_256(k, a, w, q4, o_begin, o_end, y, ldy, decode);
    return;
  }
  const uint64_t rb = row_bytes(dtype, a.in);
  constexpr int64_t kTokenBlock = 64;  // a block of tokens' activations stays in L2 while every row tile meets it
  for (int64_t t0 = 0; t0 < a.T; t0 += kTokenBlock) {
    const int64_t t1 = std::min(a.T, t0 + kTokenBlock);
    for (int64_t o = o_begin; o < o_end; o += 2)
      for (int64_t t = t0; t < t1; t += 4) {
        const int r = int(std::min<int64_t>(2, o_end - o)), c = int(std::min<int64_t>(4, t1 - t));
        k.row[r - 1][c - 1](w + uint64_t(o) * rb, rb, a, t, y + t * ldy + o, ldy);
      }
  }
}

#else

void gemm_q8_rows_256(const Q8Activations&, const std::byte*, DType, int64_t, int64_t, float*, int64_t,
                      DecodeStreaming, Int8Dot) {
  throw Error("gemm_q8_rows_256: not an x86-64 build");
}

#endif

}  // namespace g4::ops
