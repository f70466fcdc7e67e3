// Q4_K_R16 (platform/row_interleave.h: Q4_K super-blocks of 16 rows interleaved) x int8
// activations on AVX512_VNNI: 16 rows per VPDPBUSD, one f32 lane per row, as the Q4_0_R16 kernels
// in gemm_q8.cpp, with Q4_K's per-sub-block scales and mins.
//
// Per output (row, token), per sub-block j of super-block s (activation block b = 8s + j), in
// order: the exact int32 sum Σ code·q over its 32 values (8 VPDPBUSD), then
//   acc = fma(float(sum), (d·sc_j) · x_scale, acc)
//   acc = fma(dmin·m_j, x_scale · (−Σq), acc)
// (d·sc_j and dmin·m_j are exact: an f16 times a 6-bit integer). Decode and prefill run these
// same steps, so a token's bits do not depend on the batch (tested).
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/gemm_kquant.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#include "ops/x86_vnni_target.h"

namespace g4::ops {

#if defined(__x86_64__)
namespace {

constexpr int64_t kSuperBlock = 256;

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// x_scale · (−Σq) of one activation block, from its −8·Σq start: the min term's activation side.
inline float min_weight(float x_scale, int32_t q4_start) { return x_scale * float(q4_start / 8); }

// The 16 rows' d and dmin of the super-block column `col`, in f32.
G4_VNNI_TARGET inline void column_d_dmin(const std::byte* col, __m512& d, __m512& dmin) {
  d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col)));
  dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + 32)));
}

// Sub-block j's 16 scales and mins (lane r: row r) of the super-block column `col`, times the
// rows' d and dmin (column_d_dmin): d·sc_j and dmin·m_j in f32.
G4_VNNI_TARGET inline void sub_block_scales(const std::byte* col, int j, __m512 d, __m512 dmin, __m512& dsc,
                                            __m512& dmn) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + kQ4KLowScales + 16 * j));
  __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + kQ4KHighScales + 16 * (j / 2)));
  if (j % 2) hi = _mm_srli_epi16(hi, 4);
  const __m128i n4 = _mm_set1_epi8(0x0F), n2 = _mm_set1_epi8(0x03);
  // 16-bit shifts move bits across the bytes of a lane pair; the masks keep each byte's own.
  const __m128i sc = _mm_or_si128(_mm_and_si128(lo, n4), _mm_slli_epi16(_mm_and_si128(hi, n2), 4));
  const __m128i m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(lo, 4), n4),
                                 _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hi, 2), n2), 4));
  dsc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
  dmn = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
}

// One sub-block into a row lane accumulator (the two steps in the header's order).
G4_VNNI_TARGET inline __m512 accumulate(__m512 acc, __m512i sum, __m512 dsc, __m512 dmn, float x_scale,
                                        int32_t q4_start) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dsc, _mm512_set1_ps(x_scale)), acc);
  return _mm512_fmadd_ps(dmn, _mm512_set1_ps(min_weight(x_scale, q4_start)), acc);
}

// Decode: G groups side by side (G sequential weight streams) x the one token. Each chunk's 8
// value vectors are read once for both of its sub-blocks (low and high nibbles). Every chunk
// requests its group's bytes one super-block column (2304 B) ahead with software prefetch: with
// ~2x the instructions per byte of the Q4_0 kernel the out-of-order window alone kept too few
// cache misses in flight (E2B-like decode layers, bench/matmul_bench.cpp BM_MatmulQ4_K_R16 T = 1,
// Zen 5 VM: 1 thread 21 -> 38 GB/s, 2 threads 44 -> 65 GB/s; half and twice the distance did
// no better).
template <int G>
G4_VNNI_TARGET void decode_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, float* y) {
  const int64_t supers = a.in / kSuperBlock;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ4KColumnBytes;
    __m512 d[G], dmin[G];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) column_d_dmin(col + uint64_t(g) * group_bytes, d[g], dmin[g]);
    for (int k = 0; k < 4; ++k) {
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g)  // a quarter of the column (9 lines), one column ahead
        for (uint64_t l = 0; l < kQ4KColumnBytes / 4; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(col + uint64_t(g) * group_bytes + kQ4KColumnBytes / 4 * k + l +
                                                     kQ4KColumnBytes),
                       _MM_HINT_T0);
      const int64_t b0 = 8 * s + 2 * k;  // the chunk's two activation blocks: b0 (low nibbles), b0 + 1
      const int8_t* x0 = a.q.data() + b0 * kQ8Block;
      __m512i lo[G], hi[G];
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        const __m512i xl = _mm512_set1_epi32(load_i32(x0 + 4 * v)), xh = _mm512_set1_epi32(load_i32(x0 + 32 + 4 * v));
        #pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const __m512i raw =
              _mm512_loadu_si512(col + uint64_t(g) * group_bytes + kQ4KValues + 512 * uint64_t(k) + 64 * uint64_t(v));
          lo[g] = _mm512_dpbusd_epi32(lo[g], _mm512_and_si512(raw, nibble), xl);
          hi[g] = _mm512_dpbusd_epi32(hi[g], _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble), xh);
        }
      }
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        __m512 dsc, dmn;
        sub_block_scales(col + uint64_t(g) * group_bytes, 2 * k, d[g], dmin[g], dsc, dmn);
        acc[g] = accumulate(acc[g], lo[g], dsc, dmn, a.scale[size_t(b0)], a.q4_start[size_t(b0)]);
        sub_block_scales(col + uint64_t(g) * group_bytes, 2 * k + 1, d[g], dmin[g], dsc, dmn);
        acc[g] = accumulate(acc[g], hi[g], dsc, dmn, a.scale[size_t(b0 + 1)], a.q4_start[size_t(b0 + 1)]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + 16 * g, acc[g]);
}

// Prefill: G groups (1 or 2) x one panel of kPanelTokens tokens (`count` of them real), as
// gemm_q8.cpp's prefill16: each weight vector meets 6 tokens, each broadcast G groups. A chunk's
// vectors are read once per sub-block (low nibbles, then high), from L1 the second time.
template <int G>
G4_VNNI_TARGET void prefill_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, int64_t t, float* y,
                                int64_t ldy, int count) {
  constexpr int C = int(kPanelTokens);
  const int64_t supers = a.in / kSuperBlock;
  const size_t first = a.panel_cell(t, 0);  // t starts a panel; block b's cells follow at first + b·C
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[G][C];
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ4KColumnBytes;
    for (int j = 0; j < 8; ++j) {
      const size_t cell = first + size_t(8 * s + j) * C;
      const int8_t* xq = a.panel_q.data() + cell * kQ8Block;
      const std::byte* values = col + kQ4KValues + 512 * uint64_t(j / 2);
      __m512i sum[G][C];
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
        #pragma GCC unroll 8
        for (int c = 0; c < C; ++c) sum[g][c] = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m512i wv[G];
        #pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m512i raw = _mm512_loadu_si512(values + uint64_t(g) * group_bytes + 64 * uint64_t(v));
          wv[g] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(raw, 4) : raw, nibble);
        }
        #pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i x = _mm512_set1_epi32(load_i32(xq + c * kQ8Block + 4 * v));
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g) sum[g][c] = _mm512_dpbusd_epi32(sum[g][c], wv[g], x);
        }
      }
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        __m512 d, dmin, dsc, dmn;
        column_d_dmin(col + uint64_t(g) * group_bytes, d, dmin);
        sub_block_scales(col + uint64_t(g) * group_bytes, j, d, dmin, dsc, dmn);
        #pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          acc[g][c] = accumulate(acc[g][c], sum[g][c], dsc, dmn, a.panel_scale[cell + size_t(c)],
                                 a.panel_q4_start[cell + size_t(c)]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      if (c < count) _mm512_storeu_ps(y + c * ldy + 16 * g, acc[g][c]);
}

}  // namespace

void gemm_q4k_interleaved_rows(const Q8Activations& a, const std::byte* w, int64_t o_begin, int64_t o_end, float* y,
                               int64_t ldy, DecodeStreaming decode) {
  if (a.in % kSuperBlock)
    throw Error("gemm_q4k_interleaved_rows: " + std::to_string(a.in) + " inputs are not whole Q4_K super-blocks of 256");
  if (o_begin % kInterleaveRows || o_end % kInterleaveRows)
    throw Error("gemm_q4k_interleaved_rows: rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) +
                ") must be whole groups of 16");
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(DType::Q4_K, a.in);
  const int64_t g_begin = o_begin / kInterleaveRows, g_end = o_end / kInterleaveRows;
  // Decode: the streams side by side that ops::plan_decode_streaming chose (its software prefetch
  // distance is not used: this kernel prefetches one column ahead on every core, see decode_q4k).
  walk_interleaved_groups(
      a.T, g_begin, g_end, decode_groups_for(decode, group_bytes),
      [&](int n, int64_t g) {
        (n == 4 ? decode_q4k<4> : n == 2 ? decode_q4k<2> : decode_q4k<1>)(w + uint64_t(g) * group_bytes, group_bytes, a,
                                                                           y + g * kInterleaveRows);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        (pair ? prefill_q4k<2> : prefill_q4k<1>)(w + uint64_t(g) * group_bytes, group_bytes, a, t,
                                                  y + t * ldy + g * kInterleaveRows, ldy, count);
      });
}

#else  // not x86-64: never reached (gemm_q8_available() is false)

void gemm_q4k_interleaved_rows(const Q8Activations&, const std::byte*, int64_t, int64_t, float*, int64_t,
                               DecodeStreaming) {}

#endif

}  // namespace g4::ops
