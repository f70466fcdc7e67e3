// The row-major Q4_K, Q5_K and Q6_K tiles on 256-bit vectors (gemm_q8_avx2.h), written once and
// compiled once per tier as gemm_q8_256-inl.h is: gemm_kquant_256.cpp includes this file with
// G4_Q8_NS, G4_Q8_TARGET and G4_Q8_VNNI defined, so that the AVX2 instantiation never holds
// AVX-VNNI's VPDPBUSD (an AVX2-only CPU faults on it); kSuperBlock, kRows, kTokens and
// KQuantRowTiles256 are that file's. No include guard, on purpose.
//
// A port of gemm_kquant.cpp's tiles that keeps each output's bits. There an output's 16 f32 lanes
// are 4-value quads, lanes 0-7 of the even activation blocks 2p and 8-15 of the odd ones; here they
// are two 8-lane accumulators, `even` and `odd`, each lane fed the same exact int32 quad sum by the
// same f32 steps in the same order:
//   Q4_K / Q5_K, per super-block: mins = fma(dmin·m_j, scale_j·Σq_j, mins) (lane j: block j), then
//     per block j: acc = fma(float(Σ code·q), (d·sc_j)·scale_j, acc), acc the even or odd one;
//   Q6_K, per block j: acc = fma(float(Σ (code − 32)·q), (d·sc_i)·scale_j, acc), i the quad's
//     16-value sub-block;
//   y = sum8(even + odd), less sum8(mins) for Q4_K / Q5_K; sum8(v) = (f0 + f2) + (f1 + f3) for
//     f = v[0-3] + v[4-7], the order of x86::lane_sum and gemm_kquant.cpp's lane_sum8.
// So a result depends on neither T, the tile nor the row range, and equals the AVX-512 kernel's.
//
// No int16 sum saturates (activations are −127..127). VPMADDUBSW adds two code·q products: Q4_K
// codes <= 15 (high nibbles shifted down; read in place, 2·240·127 would overflow), Q5_K <= 31:
// 2·31·127 = 7874; Q6_K <= 63: 16002, less the pair's offset 32·(q_a + q_b) (<= 8128), leaves
// Σ (code − 32)·q, at most 2·32·127 = 8128 in size.
//
// 16 ymm registers, not 32, and two accumulators per output: tiles of 2 rows x up to 3 tokens, not
// 4 x 4, each super-block's scale products and min sums waiting in L1.
#include "ops/isa/lanes_256-inl.h"

namespace g4::ops::G4_Q8_NS {
namespace {  // this tier's kernels, private to the one file that includes them

// The tier's products of one activation block: lane i = Σ over quad i of u·s (u: weight codes,
// s: activations). Q6_K's codes are stored +32: q6_offset(s) is the offset's part, which dot_q6
// takes off (AVX2: 32·(q_a + q_b) per int16 pair, before the pairs widen; AVX-VNNI: −32·Σ per
// quad, the int32 sum's start), leaving the AVX-512 kernel's lane Σ (code − 32)·q either way.
G4_Q8_TARGET inline __m256i dot(__m256i u, __m256i s) {
#if G4_Q8_VNNI
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return pair_sums(_mm256_maddubs_epi16(u, s));
#endif
}

G4_Q8_TARGET inline __m256i q6_offset(__m256i s) {
#if G4_Q8_VNNI
  const __m256i zero = _mm256_setzero_si256();
  return _mm256_sub_epi32(zero, _mm256_dpbusd_avx_epi32(zero, _mm256_set1_epi8(32), s));
#else
  return _mm256_maddubs_epi16(_mm256_set1_epi8(32), s);
#endif
}

G4_Q8_TARGET inline __m256i dot_q6(__m256i u, __m256i s, __m256i offset) {
#if G4_Q8_VNNI
  return _mm256_dpbusd_avx_epi32(offset, u, s);
#else
  return pair_sums(_mm256_sub_epi16(_mm256_maddubs_epi16(u, s), offset));
#endif
}

// Each byte's bits from bit `from` on moved to bit 4, the rest masked off. The 16-bit shifts
// carry bits across bytes only into the bits outside `mask` (0x10, or 0x30 with from <= 6).
G4_Q8_TARGET inline __m256i bits_to_4(__m256i v, int from, char mask) {
  const __m256i shifted = from < 4 ? _mm256_slli_epi16(v, 4 - from) : _mm256_srli_epi16(v, from - 4);
  return _mm256_and_si256(shifted, _mm256_set1_epi8(mask));
}

// Q4_K / Q5_K: d·sc_j and dmin·m_j of the super-block's 8 sub-blocks in lane j, from one load of
// d, dmin and the scale words a, b, c (kquant_scales_mins): sc_0-3 = a & 63, m_0-3 = b & 63,
// sc_4-7 = c's low nibbles | a's top bits >> 2, m_4-7 = c's high nibbles | b's top bits >> 2.
G4_Q8_TARGET inline void q45k_scales(const std::byte* blk, __m256& dsc, __m256& dmn) {
  static_assert(q4_k::kDAt == 0 && q4_k::kDminAt == 2 && q4_k::kScalesAt == 4, "one 16-byte load");
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
  const __m128i low = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
  const __m128i top = _mm_srli_epi16(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 0, 1, 0)), 2);  // words -, a, -, b
  const __m128i sm = _mm_or_si128(_mm_and_si128(low, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
                                  _mm_and_si128(top, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
  const __m256 d = _mm256_castps128_ps256(_mm_cvtph_ps(v));  // lane 0: d, lane 1: dmin
  dsc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)),
                      _mm256_permutevar8x32_ps(d, _mm256_setzero_si256()));
  dmn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))),
                      _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(1)));
}

// Q4_K / Q5_K, chunk k (values 64k .. 64k + 63): sub-block 2k's codes (low nibbles) in `even`,
// 2k + 1's (high nibbles shifted down) in `odd`, Q5_K's fifth bits (qh bits 2k, 2k + 1) as bit 4.
template <bool kQ5>
G4_Q8_TARGET inline void q45k_codes(const std::byte* blk, int k, __m256i& even, __m256i& odd) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i b = load256(blk + (kQ5 ? q5_k::kQsAt : q4_k::kQsAt) + 32 * k);
  even = _mm256_and_si256(b, nibble);
  odd = _mm256_and_si256(_mm256_srli_epi16(b, 4), nibble);
  if constexpr (kQ5) {
    const __m256i h = load256(blk + q5_k::kQhAt);
    even = _mm256_or_si256(even, bits_to_4(h, 2 * k, 0x10));
    odd = _mm256_or_si256(odd, bits_to_4(h, 2 * k + 1, 0x10));
  }
}

// Q6_K, values 128h + 64j + 32e + l (l < 32) as codes 0..63 (stored +32): the low (j = 0) or high
// (j = 1) nibble of ql byte 64h + 32e + l, and bits 4j + 2e, +1 of qh byte 32h + l as bits 4-5.
G4_Q8_TARGET inline __m256i q6k_codes(const std::byte* blk, int h, int j, int e) {
  const __m256i ql = load256(blk + q6_k::kQlAt + 64 * h + 32 * e), qh = load256(blk + q6_k::kQhAt + 32 * h);
  const __m256i low = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * j), _mm256_set1_epi8(0x0F));
  return _mm256_or_si256(low, bits_to_4(qh, 4 * j + 2 * e, 0x30));
}

// Q6_K: d·sc_i of the super-block's 16 sub-blocks to out[i].
G4_Q8_TARGET inline void q6k_scales(const std::byte* blk, float* out) {
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q6_k::kScalesAt));
  const __m256 d = _mm256_set1_ps(half_at(blk + q6_k::kDAt));
  _mm256_store_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d));
  _mm256_store_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))), d));
}

// Lane i of the result: lane 2m + i / 4 of v (a block's two 16-value sub-blocks, 4 quads each).
G4_Q8_TARGET inline __m256 spread_pair(__m256 v, int m) {
  const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_set1_epi32(2 * m));
  return _mm256_permutevar8x32_ps(v, idx);
}

// The prefetch of one block's lines `ahead` bytes on, as the AVX-512 tiles.
inline void prefetch_block(const std::byte* blk, uint64_t ahead, uint64_t bytes) {
  for (uint64_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + o), _MM_HINT_T0);
}

// R rows x C tokens of Q4_K / Q5_K. Per super-block: per token the blocks' scale · Σq, per (row,
// token) the min term's FMA and the products (d·sc_j)·scale_j, to L1; per chunk k, per (row,
// token): blocks 8sb + 2k (even) and + 1 (odd), one product and FMA each.
template <int R, int C, bool kQ5>
G4_Q8_TARGET void tile_q45k(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t, float* y, int64_t ldy) {
  constexpr uint64_t kBytes = kQ5 ? q5_k::kBlockBytes : q4_k::kBlockBytes;
  const int64_t in = a.in, blocks = in / kQ8Block;
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m256 acc[R][C][2];
  alignas(32) float mins[R][C][8] = {};
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < in / kSuperBlock; ++sb) {
    alignas(32) float xsum[C][8], prod[R][C][8];
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const int64_t k0 = (t + c) * blocks + sb * 8;  // Σq = −q4_start / 8
      const __m256 q = _mm256_cvtepi32_ps(load256(a.q4_start.data() + k0));
      _mm256_store_ps(xsum[c],
                      _mm256_mul_ps(_mm256_mul_ps(q, _mm256_set1_ps(-0.125f)), _mm256_loadu_ps(a.scale.data() + k0)));
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + r * rb + uint64_t(sb) * kBytes;
      prefetch_block(blk, prefetch, kBytes);
      __m256 dsc, dmn;
      q45k_scales(blk, dsc, dmn);
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const __m256 m = _mm256_fmadd_ps(dmn, _mm256_load_ps(xsum[c]), _mm256_load_ps(mins[r][c]));
        _mm256_store_ps(mins[r][c], m);
        const float* xs = a.scale.data() + (t + c) * blocks + sb * 8;
        _mm256_store_ps(prod[r][c], _mm256_mul_ps(dsc, _mm256_loadu_ps(xs)));
      }
    }
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int64_t v0 = sb * kSuperBlock + 64 * k;
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i even, odd;
        q45k_codes<kQ5>(w + r * rb + uint64_t(sb) * kBytes, k, even, odd);
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const int8_t* x = a.q.data() + (t + c) * in + v0;
          const __m256 pe = _mm256_set1_ps(prod[r][c][2 * k]), po = _mm256_set1_ps(prod[r][c][2 * k + 1]);
          acc[r][c][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot(even, load256(x))), pe, acc[r][c][0]);
          acc[r][c][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot(odd, load256(x + 32))), po, acc[r][c][1]);
        }
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      y[c * ldy + r] = sum8(_mm256_add_ps(acc[r][c][0], acc[r][c][1])) - sum8(_mm256_load_ps(mins[r][c]));
}

// R rows x C tokens of Q6_K. Per block e of activation pair p = 4sb + 2h + j: per token its offset,
// per row its codes and its two sub-blocks' d·sc spread over their quads, per (row, token) one
// product, its scale (d·sc)·scale and one FMA.
template <int R, int C>
G4_Q8_TARGET void tile_q6k(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t, float* y, int64_t ldy) {
  const int64_t in = a.in, pairs = a.pairs();
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m256 acc[R][C][2];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < in / kSuperBlock; ++sb) {
    alignas(32) float dsc[R][16];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + r * rb + uint64_t(sb) * q6_k::kBlockBytes;
      prefetch_block(blk, prefetch, q6_k::kBlockBytes);
      q6k_scales(blk, dsc[r]);
    }
    #pragma GCC unroll 4
    for (int h = 0; h < 2; ++h)
      #pragma GCC unroll 4
      for (int j = 0; j < 2; ++j) {
        const int64_t p = sb * 4 + 2 * h + j;
        #pragma GCC unroll 4
        for (int e = 0; e < 2; ++e) {
          __m256i offset[C];
          #pragma GCC unroll 4
          for (int c = 0; c < C; ++c) offset[c] = q6_offset(load256(a.q.data() + (t + c) * in + 64 * p + 32 * e));
          #pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const __m256i codes = q6k_codes(w + r * rb + uint64_t(sb) * q6_k::kBlockBytes, h, j, e);
            const __m256 ws = spread_pair(_mm256_load_ps(dsc[r] + 8 * h), 2 * j + e);
            #pragma GCC unroll 4
            for (int c = 0; c < C; ++c) {
              const __m256i s = dot_q6(codes, load256(a.q.data() + (t + c) * in + 64 * p + 32 * e), offset[c]);
              const __m256 xs = _mm256_loadu_ps(a.pair_scale.data() + ((t + c) * pairs + p) * 16 + 8 * e);
              acc[r][c][e] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(ws, xs), acc[r][c][e]);
            }
          }
        }
      }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[c * ldy + r] = sum8(_mm256_add_ps(acc[r][c][0], acc[r][c][1]));
}

// Tiles of R rows x C tokens, for Q4_K, Q5_K and Q6_K, into the table.
template <int R, int C>
constexpr void set_tiles(KQuantRowTiles256& k) {
  k.tile[0][R - 1][C - 1] = tile_q45k<R, C, false>;
  k.tile[1][R - 1][C - 1] = tile_q45k<R, C, true>;
  k.tile[2][R - 1][C - 1] = tile_q6k<R, C>;
}

// This tier's tiles of every size up to kRows x kTokens, for the walk in gemm_kquant_256.cpp.
constexpr KQuantRowTiles256 tiles() {
  static_assert(kRows == 2 && kTokens == 3, "a tile of each size up to kRows x kTokens below");
  KQuantRowTiles256 k{};
  set_tiles<1, 1>(k), set_tiles<1, 2>(k), set_tiles<1, 3>(k);
  set_tiles<2, 1>(k), set_tiles<2, 2>(k), set_tiles<2, 3>(k);
  return k;
}

}  // namespace
}  // namespace g4::ops::G4_Q8_NS
