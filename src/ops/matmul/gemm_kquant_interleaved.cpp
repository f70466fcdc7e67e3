// Q4_K_R16, Q5_K_R16 and Q6_K_R16 (platform/row_interleave.h: K-quant super-blocks of 16 rows
// interleaved) x int8 activations on AVX512_VNNI: 16 rows per VPDPBUSD, one f32 lane per row, as
// the Q4_0_R16 kernels in gemm_q8.cpp, with the K-quants' per-sub-block scales. Decode and
// prefill run the same steps per output, so a token's bits do not depend on the batch (tested).
//
// Q6_K: per output, per super-block s, per half h, per j (0, 1), per c (0..3): sub-block
// i = 8h + 2c + j (values 128h + 32c + 16j ..+15, all in activation block b = 8s + 4h + c):
//   sum = −32·Σq (the codes' +32 offset) + Σ code·q (4 VPDPBUSD), exact in int32, then
//   acc = fma(float(sum), (d·sc_i) · x_scale, acc)
// (d·sc_i exact: an f16 times an int8).
//
// Q4_K and Q5_K (whose codes have a fifth bit): per output (row, token), per sub-block j of
// super-block s (activation block b = 8s + j), in order: the exact int32 sum Σ code·q over its 32
// values (8 VPDPBUSD), then
//   acc = fma(float(sum), (d·sc_j) · x_scale, acc)
//   acc = fma(dmin·m_j, x_scale · (−Σq), acc)
// (d·sc_j and dmin·m_j are exact: an f16 times a 6-bit integer). Q4_K's odd sub-blocks (high
// nibbles) sum 16·code·q and take x_scale/16: the same products (accumulate).
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/matmul/gemm_kquant.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#if defined(__x86_64__)
#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

void check_kquant_interleaved_args(const Q8Activations& a, DType dtype, int64_t o_begin, int64_t o_end) {
  if (dtype != DType::Q4_K_R16 && dtype != DType::Q5_K_R16 && dtype != DType::Q6_K_R16)
    throw Error("gemm_kquant_interleaved_rows: " + std::string(dtype_name(dtype)) + " is not an interleaved K-quant");
  if (a.in % q4_k::kBlockValues)
    throw Error("gemm_kquant_interleaved_rows: " + std::to_string(a.in) + " inputs are not whole super-blocks of 256");
  if (o_begin % kInterleaveRows || o_end % kInterleaveRows)
    throw Error("gemm_kquant_interleaved_rows: rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) +
                ") must be whole groups of 16");
}

#if defined(__x86_64__)
namespace {

constexpr int64_t kSuperBlock = q4_k::kBlockValues;  // Q4_K, Q5_K and Q6_K alike

// x_scale · (−Σq) of one activation block, from its −8·Σq start: the min term's activation side.
inline float min_weight(float x_scale, int32_t q4_start) { return x_scale * float(q4_start / 8); }

// The 16 rows' d and dmin of the super-block column `col`, in f32.
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline void column_d_dmin(const std::byte* col, __m512& d, __m512& dmin) {
  d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col)));
  dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + 32)));
}

// The 16 rows' 6-bit scales and mins of all 8 sub-blocks of the super-block column `col`, as
// bytes: out[16j + r] = sc_j of row r, out[128 + 16j + r] = m_j of row r. Once per column: one
// sub-block at a time this unpacking was about a fifth of the decode kernel's vector operations.
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline void unpack_column_scales(const std::byte* col, uint8_t* out) {
  // High-bit byte lane q (16 B) serves sub-blocks 2q (its low nibbles) and 2q + 1 (its high ones).
  const __m512i hi = _mm512_loadu_si512(col + kQ4KHighScales);
  const __m512i n4 = _mm512_set1_epi8(0x0F), n2 = _mm512_set1_epi8(0x03);
  const long long four = 0x0004000400040004;  // lanes 1 and 3 of each half take the high nibbles
  const __m512i shift = _mm512_set_epi64(four, four, 0, 0, four, four, 0, 0);
  for (int p = 0; p < 2; ++p) {  // sub-blocks 4p .. 4p + 3
    const __m512i lo = _mm512_loadu_si512(col + kQ4KLowScales + 64 * uint64_t(p));
    const __m512i h = _mm512_srlv_epi16(p ? _mm512_shuffle_i32x4(hi, hi, 0xFA) : _mm512_shuffle_i32x4(hi, hi, 0x50), shift);
    // 16-bit shifts move bits across the bytes of a lane pair; the masks keep each byte's own.
    const __m512i sc = _mm512_or_si512(_mm512_and_si512(lo, n4), _mm512_slli_epi16(_mm512_and_si512(h, n2), 4));
    const __m512i m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), n4),
                                      _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), n2), 4));
    _mm512_storeu_si512(out + 64 * p, sc);
    _mm512_storeu_si512(out + 128 + 64 * p, m);
  }
}

// Sub-block j's d·sc_j and dmin·m_j in f32 (lane r: row r), from unpack_column_scales' bytes and
// the rows' d and dmin (column_d_dmin).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline void sub_block_scales(const uint8_t* scales, int j, __m512 d, __m512 dmin,
                                                                   __m512& dsc, __m512& dmn) {
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * j));
  const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 128 + 16 * j));
  dsc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
  dmn = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
}

// One sub-block into a row lane accumulator (the two steps in the header's order). sum16: the
// sum is 16 times Σ code·q (codes read as their high nibbles in place, q · 16·code), and the
// activation scale is taken 1/16 times: d·sc_j · x_scale/16 is exactly d·sc_j · x_scale rounded,
// over 16 (while it stays a normal float), so each product and the result are the same bits as
// with the codes shifted down (|16·Σ| < 2^20: exact in f32).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512 accumulate(__m512 acc, __m512i sum, __m512 dsc, __m512 dmn,
                                                               float x_scale, int32_t q4_start, bool sum16 = false) {
  const float product_scale = sum16 ? x_scale * 0.0625f : x_scale;
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dsc, _mm512_set1_ps(product_scale)), acc);
  return _mm512_fmadd_ps(dmn, _mm512_set1_ps(min_weight(x_scale, q4_start)), acc);
}

// Decode: G groups side by side (G sequential weight streams) x the one token. Each chunk's 8
// value vectors are read once for both of its sub-blocks (low and high nibbles). Every chunk
// requests its stream's bytes three quarters of a super-block column (1728 B) ahead with
// software prefetch, a line per vector read: with ~2x the instructions per byte of the Q4_0
// kernel the out-of-order window alone kept too few cache misses in flight. Past a group's end the
// stream runs on in the group it reads next, G on: E2B's 1536-wide rows are 6 columns, and
// prefetching into the neighbouring group (read by another stream already) left a sixth of the
// columns unrequested (Q4_K_M decode +2.5-4 points of its read pass, docs/perf.md). Without
// kPrefetch (a decode plan without software prefetch: the AMD cores with AVX-512) no request is
// issued: on Zen 4 the requests and their address arithmetic cost more than they gained, E2B-like
// Q4_K layers from memory at 0.68 of their read pass with them, 0.91 without (docs/perf.md).
// Q5_K (kQ5): the same, each code's fifth bit taken from the column's high-bit vectors.
template <bool kQ5>
constexpr uint64_t q45k_column_bytes = kQ5 ? kQ5KColumnBytes : kQ4KColumnBytes;

// Bit `bit` of each byte of the Q5_K high-bit vector qh, moved to bit 4 (the code's fifth bit).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512i fifth_bits(__m512i qh, int bit) {
  return _mm512_slli_epi16(_mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(bit)), _mm512_set1_epi8(1)), 4);
}

template <int G, bool kQ5, bool kPrefetch>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void decode_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                      float* y) {
  constexpr uint64_t kColumn = q45k_column_bytes<kQ5>, kAhead = kquant_decode_prefetch_bytes(kColumn);
  const int64_t supers = a.in / kSuperBlock;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kColumn;
    __m512 d[G], dmin[G];
    alignas(64) uint8_t scales[G][256];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      column_d_dmin(col + uint64_t(g) * group_bytes, d[g], dmin[g]);
      unpack_column_scales(col + uint64_t(g) * group_bytes, scales[g]);
    }
    for (int k = 0; k < 4; ++k) {
      // This quarter of the column (9 or 11 lines) kAhead further on in this stream: past its
      // group's end, in the group it reads next (G groups on), not the neighbouring group
      // another stream of this call is reading.
      const uint64_t ahead = stream_prefetch_offset(uint64_t(s) * kColumn + kColumn / 4 * uint64_t(k) + kAhead, group_bytes, G);
      const int64_t b0 = 8 * s + 2 * k;  // the chunk's two activation blocks: b0 (low nibbles), b0 + 1
      const int8_t* x0 = a.q.data() + b0 * kQ8Block;
      __m512i lo[G], hi[G];
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        // Line v of the quarter ahead (and lines 8.. with the first vectors), one request per
        // vector read: in bursts of 9-11 per quarter 3-5 points slower (docs/perf.md). Inline:
        // GCC 12 dropped these prefetches from a helper.
        #pragma GCC unroll 4
        for (int g = 0; g < G && kPrefetch; ++g)
          for (uint64_t m = uint64_t(v); 64 * m < kColumn / 4; m += 8)
            _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + 64 * m), _MM_HINT_T0);
        const __m512i xl = _mm512_set1_epi32(x86::load_i32(x0 + 4 * v)), xh = _mm512_set1_epi32(x86::load_i32(x0 + 32 + 4 * v));
        #pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const std::byte* gc = col + uint64_t(g) * group_bytes;
          const __m512i raw = _mm512_loadu_si512(gc + kQ4KValues + 512 * uint64_t(k) + 64 * uint64_t(v));
          // Q4_K: high nibbles in place (16 x the code; see accumulate), one shift fewer per vector.
          __m512i cl = _mm512_and_si512(raw, nibble);
          __m512i ch = kQ5 ? _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble) : _mm512_andnot_si512(nibble, raw);
          if constexpr (kQ5) {
            const __m512i qh = _mm512_loadu_si512(gc + kQ5KHighBits + 64 * uint64_t(v));
            cl = _mm512_or_si512(cl, fifth_bits(qh, 2 * k));
            ch = _mm512_or_si512(ch, fifth_bits(qh, 2 * k + 1));
          }
          lo[g] = _mm512_dpbusd_epi32(lo[g], cl, xl);
          hi[g] = _mm512_dpbusd_epi32(hi[g], ch, xh);
        }
      }
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        __m512 dsc, dmn;
        sub_block_scales(scales[g], 2 * k, d[g], dmin[g], dsc, dmn);
        acc[g] = accumulate(acc[g], lo[g], dsc, dmn, a.scale[size_t(b0)], a.q4_start[size_t(b0)]);
        sub_block_scales(scales[g], 2 * k + 1, d[g], dmin[g], dsc, dmn);
        acc[g] = accumulate(acc[g], hi[g], dsc, dmn, a.scale[size_t(b0 + 1)], a.q4_start[size_t(b0 + 1)], !kQ5);
      }
    }
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + 16 * g, acc[g]);
}

// Prefill: G groups (1 or 2) x one panel of kPanelTokens tokens (`count` of them real), as
// gemm_q8.cpp's prefill16: each weight vector meets 6 tokens, each broadcast G groups. A chunk's
// vectors are read once per sub-block (low nibbles, then high), from L1 the second time.
template <int G, bool kQ5>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void prefill_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                       int64_t t, float* y, int64_t ldy, int count) {
  constexpr int C = int(kPanelTokens);
  constexpr uint64_t kColumn = q45k_column_bytes<kQ5>;
  const int64_t supers = a.in / kSuperBlock;
  const size_t first = a.panel_cell(t, 0);  // t starts a panel; block b's cells follow at first + b·C
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[G][C];
  x86::zero_tile<G, C>(acc);
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kColumn;
    __m512 d[G], dmin[G];
    alignas(64) uint8_t scales[G][256];
    #pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      column_d_dmin(col + uint64_t(g) * group_bytes, d[g], dmin[g]);
      unpack_column_scales(col + uint64_t(g) * group_bytes, scales[g]);
    }
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
          // As decode: Q4_K's high nibbles in place, 16 x the code.
          wv[g] = j % 2 == 0 ? _mm512_and_si512(raw, nibble)
                  : kQ5      ? _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble)
                             : _mm512_andnot_si512(nibble, raw);
          if constexpr (kQ5)
            wv[g] = _mm512_or_si512(
                wv[g], fifth_bits(_mm512_loadu_si512(col + uint64_t(g) * group_bytes + kQ5KHighBits + 64 * uint64_t(v)), j));
        }
        #pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i x = _mm512_set1_epi32(x86::load_i32(xq + c * kQ8Block + 4 * v));
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g) sum[g][c] = _mm512_dpbusd_epi32(sum[g][c], wv[g], x);
        }
      }
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        __m512 dsc, dmn;
        sub_block_scales(scales[g], j, d[g], dmin[g], dsc, dmn);
        #pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          acc[g][c] = accumulate(acc[g][c], sum[g][c], dsc, dmn, a.panel_scale[cell + size_t(c)],
                                 a.panel_q4_start[cell + size_t(c)], !kQ5 && j % 2);
      }
    }
  }
  x86::store_group_panel<G, C>(acc, y, ldy, count);
}

// The codes of part c (0..3) of one Q6_K_R16 value triple (lo, hi: the ql vectors; qh): value
// 128h + 32c + 4v + k of each row, 0..63 (row_interleave.h).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512i q6k_codes(__m512i lo, __m512i hi, __m512i qh, int c) {
  const __m512i n4 = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i l = c % 2 ? hi : lo;
  const __m512i low = _mm512_and_si512(c < 2 ? l : _mm512_srli_epi16(l, 4), n4);
  // Bits 2c, 2c+1 of qh to bits 4, 5 (16-bit shifts; the mask keeps each byte's own bits).
  const __m512i h = c == 0 ? _mm512_slli_epi16(qh, 4) : c == 1 ? _mm512_slli_epi16(qh, 2) : c == 2 ? qh : _mm512_srli_epi16(qh, 2);
  return _mm512_or_si512(low, _mm512_and_si512(h, top));
}

// Sub-block i's 16 rows' d·sc_i in f32 (column s at `col`, d its rows' d).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512 q6k_scale(const std::byte* col, int64_t s, int i, __m512 d) {
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + q6k_scales_at(s) + 16 * uint64_t(i)));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
}

G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512 q6k_d(const std::byte* col, int64_t s) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + q6k_d_at(s))));
}

// Q6_K decode: G groups side by side x the one token; each value triple is read once for its
// four parts; requested three quarters of a column ahead into L1 with kPrefetch, as decode_q4k,
// and without it (a plan that prefetches nothing) kQ6KL2PrefetchBytes ahead into L2: at ~1.6
// of its 512-bit operations a cycle on Zen 4 this kernel leaves the memory idle between misses
// that the hardware prefetcher alone does not cover (gemm_kquant.h).
template <int G, bool kPrefetch>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void decode_q6k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                      float* y) {
  const int64_t supers = a.in / kSuperBlock;
  __m512 acc[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ6KColumnBytes;
    __m512 d[G];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) d[g] = q6k_d(col + uint64_t(g) * group_bytes, s);
    const std::byte* values = col + q6k_values_at(s);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j) {
        // This quarter's 840 B (14 lines) kAhead further on in this stream, spread over its 4
        // value triples, as decode_q4k.
        constexpr uint64_t kQuarter = kQ6KColumnBytes / 4;
        constexpr uint64_t kAhead = kPrefetch ? kquant_decode_prefetch_bytes(kQ6KColumnBytes) : kQ6KL2PrefetchBytes;
        const uint64_t ahead = stream_prefetch_offset(uint64_t(s) * kQ6KColumnBytes + kQuarter * uint64_t(2 * h + j) + kAhead,
                                                      group_bytes, G);
        const int8_t* xh = a.q.data() + (8 * s + 4 * h) * kQ8Block + 16 * j;  // part c at + 32c
        __m512i sum[G][4];
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m512i start = _mm512_set1_epi32(a.q6_start[size_t(2 * (8 * s + 4 * h + c) + j)]);
          #pragma GCC unroll 4
          for (int g = 0; g < G; ++g) sum[g][c] = start;
        }
        #pragma GCC unroll 4
        for (int v = 4 * j; v < 4 * j + 4; ++v) {
          #pragma GCC unroll 4
          for (int g = 0; g < G; ++g)
            for (uint64_t m = uint64_t(v - 4 * j); 64 * m < kQuarter; m += 4)
              _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + 64 * m),
                           kPrefetch ? _MM_HINT_T0 : _MM_HINT_T1);
          #pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            const std::byte* vec = values + uint64_t(g) * group_bytes + 1536 * uint64_t(h) + 192 * uint64_t(v);
            const __m512i lo = _mm512_loadu_si512(vec), hi = _mm512_loadu_si512(vec + 64), qh = _mm512_loadu_si512(vec + 128);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; ++c)
              sum[g][c] = _mm512_dpbusd_epi32(sum[g][c], q6k_codes(lo, hi, qh, c),
                                              _mm512_set1_epi32(x86::load_i32(xh + 32 * c + 4 * (v - 4 * j))));
          }
        }
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const float xs = a.scale[size_t(8 * s + 4 * h + c)];
          #pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            const __m512 dsc = q6k_scale(col + uint64_t(g) * group_bytes, s, 8 * h + 2 * c + j, d[g]);
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[g][c]), _mm512_mul_ps(dsc, _mm512_set1_ps(xs)), acc[g]);
          }
        }
      }
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + 16 * g, acc[g]);
}

// Q6_K prefill: G groups (1 or 2) x one panel of kPanelTokens tokens, as prefill_q4k; per
// (h, j, c) the value triples of its 4 vectors are read again from L1 for each part. Each
// sub-block's starting sum comes from the activations (panel_q6_start, computed once per
// quantization: per tile it cost about as many instructions as the products themselves).
template <int G>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void prefill_q6k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                       int64_t t, float* y, int64_t ldy, int count) {
  constexpr int C = int(kPanelTokens);
  const int64_t supers = a.in / kSuperBlock;
  const size_t first = a.panel_cell(t, 0);
  __m512 acc[G][C];
  x86::zero_tile<G, C>(acc);
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ6KColumnBytes;
    const std::byte* values = col + q6k_values_at(s);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j)
        for (int c = 0; c < 4; ++c) {
          const size_t cell = first + size_t(8 * s + 4 * h + c) * C;  // activation block b's cells
          const int8_t* xq = a.panel_q.data() + cell * kQ8Block + 16 * j;
          __m512i sum[G][C];
          #pragma GCC unroll 8
          for (int k = 0; k < C; ++k) {
            const __m512i start = _mm512_set1_epi32(a.panel_q6_start[(cell + size_t(k)) * 2 + size_t(j)]);
            #pragma GCC unroll 8
            for (int g = 0; g < G; ++g) sum[g][k] = start;
          }
          #pragma GCC unroll 4
          for (int v = 4 * j; v < 4 * j + 4; ++v) {
            __m512i codes[G];
            #pragma GCC unroll 8
            for (int g = 0; g < G; ++g) {
              const std::byte* vec = values + uint64_t(g) * group_bytes + 1536 * uint64_t(h) + 192 * uint64_t(v);
              codes[g] = q6k_codes(_mm512_loadu_si512(vec), _mm512_loadu_si512(vec + 64), _mm512_loadu_si512(vec + 128), c);
            }
            #pragma GCC unroll 8
            for (int k = 0; k < C; ++k) {
              const __m512i x = _mm512_set1_epi32(x86::load_i32(xq + k * kQ8Block + 4 * (v - 4 * j)));
              #pragma GCC unroll 8
              for (int g = 0; g < G; ++g) sum[g][k] = _mm512_dpbusd_epi32(sum[g][k], codes[g], x);
            }
          }
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g) {
            const std::byte* gc = col + uint64_t(g) * group_bytes;
            const __m512 dsc = q6k_scale(gc, s, 8 * h + 2 * c + j, q6k_d(gc, s));
            #pragma GCC unroll 8
            for (int k = 0; k < C; ++k)
              acc[g][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[g][k]),
                                          _mm512_mul_ps(dsc, _mm512_set1_ps(a.panel_scale[cell + size_t(k)])), acc[g][k]);
          }
        }
  }
  x86::store_group_panel<G, C>(acc, y, ldy, count);
}

}  // namespace

void gemm_kquant_interleaved_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                                  int64_t o_end, float* y, int64_t ldy, DecodeStreaming decode) {
  check_kquant_interleaved_args(a, dtype, o_begin, o_end);
  const bool q6 = dtype == DType::Q6_K_R16, q5 = dtype == DType::Q5_K_R16;
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(interleave_base(dtype), a.in);
  // Decode: the streams side by side that ops::plan_decode_streaming chose, with software
  // prefetch where the plan prefetches (its distance is not used: these kernels request
  // kquant_decode_prefetch_bytes ahead).
  using DecodeFn = void (*)(const std::byte*, uint64_t, const Q8Activations&, float*);
  static constexpr DecodeFn kDecode[2][3][3] = {  // [prefetch][1, 2 or 4 groups][Q4_K, Q5_K, Q6_K]
      {{decode_q4k<1, false, false>, decode_q4k<1, true, false>, decode_q6k<1, false>},
       {decode_q4k<2, false, false>, decode_q4k<2, true, false>, decode_q6k<2, false>},
       {decode_q4k<4, false, false>, decode_q4k<4, true, false>, decode_q6k<4, false>}},
      {{decode_q4k<1, false, true>, decode_q4k<1, true, true>, decode_q6k<1, true>},
       {decode_q4k<2, false, true>, decode_q4k<2, true, true>, decode_q6k<2, true>},
       {decode_q4k<4, false, true>, decode_q4k<4, true, true>, decode_q6k<4, true>}}};
  const int kind = q6 ? 2 : q5 ? 1 : 0;
  walk_interleaved_groups(
      a.T, o_begin / kInterleaveRows, o_end / kInterleaveRows, decode_groups_for(decode, group_bytes),
      [&](int n, int64_t g) {
        const DecodeFn fn = kDecode[decode.prefetch_bytes ? 1 : 0][n == 4 ? 2 : n == 2 ? 1 : 0][kind];
        fn(w + uint64_t(g) * group_bytes, group_bytes, a, y + g * kInterleaveRows);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        const std::byte* wg = w + uint64_t(g) * group_bytes;
        float* yg = y + t * ldy + g * kInterleaveRows;
        if (q6) (pair ? prefill_q6k<2> : prefill_q6k<1>)(wg, group_bytes, a, t, yg, ldy, count);
        else if (q5) (pair ? prefill_q4k<2, true> : prefill_q4k<1, true>)(wg, group_bytes, a, t, yg, ldy, count);
        else (pair ? prefill_q4k<2, false> : prefill_q4k<1, false>)(wg, group_bytes, a, t, yg, ldy, count);
      });
}

#else  // not x86-64: never reached (gemm_q8_available() is false)

void gemm_kquant_interleaved_rows(const Q8Activations&, const std::byte*, DType, int64_t, int64_t, float*, int64_t,
                                  DecodeStreaming) {}

#endif

}  // namespace g4::ops
