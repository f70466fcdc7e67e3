// The Q4_K_R16, Q5_K_R16 and Q6_K_R16 kernels on 256-bit vectors (gemm_q8_avx2.h), written once and
// compiled once per tier as gemm_q8_256-inl.h is: gemm_kquant_interleaved_256.cpp includes this
// file with G4_Q8_NS, G4_Q8_TARGET and G4_Q8_VNNI defined, so that the AVX2 instantiation never
// holds AVX-VNNI's VPDPBUSD (an AVX2-only CPU faults on it); kSuperBlock and KQuantR16Kernels256
// are that file's. No include guard, on purpose.
//
// A port of gemm_kquant_interleaved.cpp, whose header states each output's steps: a 16-row group is
// two 8-row halves (bytes [0, 32) and [32, 64) of each 64-byte vector), one f32 lane per row, and
// every output gets the same exact int32 sums and the same f32 operations in the same order as
// there, so its bits equal the AVX-512 kernel's and do not depend on T, the tile or the thread.
//
// Two departures from that kernel, neither in any value: Q4_K's high nibbles are shifted down (read
// in place as 16 x the code, VPMADDUBSW's pair sums would saturate: 2 · 240 · 127), the sub-block's
// sum then times 16 in int32, the AVX-512 kernel's integer; and with 16 ymm registers, not 32, the
// tiles are narrower: decode keeps G groups' sums of one half at a time, prefill one 8-row half x
// kPanelTokens tokens (6 sums in registers, the f32 accumulators in L1), not 2 groups x 6 tokens.
#include "ops/isa/lanes_256-inl.h"

namespace g4::ops::G4_Q8_NS {
namespace {  // this tier's kernels, private to the one file that includes them

// The tier's int8 product, sums exact in int32: acc lane r + Σ_k u0[4r + k]·s0[4r + k] + the same
// for u1, s1 (u: weight codes 0..63; s: activation bytes, |q| <= 127). AVX2 adds the two
// VPMADDUBSW results in int16 before widening, which cannot saturate: 4 · 63 · 128 = 32256.
G4_Q8_TARGET inline __m256i dot2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
#if G4_Q8_VNNI
  return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, u0, s0), u1, s1);
#else
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
  return _mm256_add_epi32(acc, pair_sums(pairs));
#endif
}

G4_Q8_TARGET inline __m128i load64(const void* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// x_scale · (−Σq) of one activation block, from its −8·Σq start: the min term's activation side.
inline float min_weight(float x_scale, int32_t q4_start) { return x_scale * float(q4_start / 8); }

template <bool kQ5>
constexpr uint64_t q45k_column_bytes = kQ5 ? kQ5KColumnBytes : kQ4KColumnBytes;

// As the AVX-512 kernel's: out[16j + r] = sc_j of row r, out[128 + 16j + r] = m_j, once per
// column. A vector holds sub-blocks 2q (bytes 0-15) and 2q + 1 (16-31), whose top bits share the
// 16 high-bit bytes: low nibbles for 2q, high ones for 2q + 1.
G4_Q8_TARGET inline void unpack_column_scales(const std::byte* col, uint8_t* out) {
  const __m256i n4 = _mm256_set1_epi8(0x0F), n2 = _mm256_set1_epi8(0x03);
  const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  for (int q = 0; q < 4; ++q) {
    const __m256i lo = load256(col + kQ4KLowScales + 32 * uint64_t(q));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + kQ4KHighScales + 16 * uint64_t(q)));
    const __m256i h = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(hi), shift);
    // Wider shifts move bits across bytes; the masks keep each byte's own.
    const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, n4), _mm256_slli_epi16(_mm256_and_si256(h, n2), 4));
    const __m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), n4),
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), n2), 4));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * q), sc);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 128 + 32 * q), m);
  }
}

// Sub-block j's d·sc_j and dmin·m_j for the rows of `half` (lane r: row 8·half + r), in f32.
G4_Q8_TARGET inline void sub_block_scales(const std::byte* col, const uint8_t* scales, int j, int half, __m256& dsc,
                                          __m256& dmn) {
  const __m128i sc = load64(scales + 16 * j + 8 * half), m = load64(scales + 128 + 16 * j + 8 * half);
  dsc = _mm256_mul_ps(halves8_at(col + 16 * half), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
  dmn = _mm256_mul_ps(halves8_at(col + 32 + 16 * half), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
}

// One sub-block into a lane accumulator, the AVX-512 kernel's two steps. sum16: a Q4_K high-nibble
// sub-block, whose sum that kernel forms as 16·Σ code·q with the activation scale taken 1/16 times;
// the same integer here, so the same bits even where x_scale/16 rounds (subnormal).
G4_Q8_TARGET inline __m256 accumulate(__m256 acc, __m256i sum, __m256 dsc, __m256 dmn, float x_scale, int32_t q4_start,
                                      bool sum16) {
  if (sum16) sum = _mm256_slli_epi32(sum, 4);
  const float product_scale = sum16 ? x_scale * 0.0625f : x_scale;
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dsc, _mm256_set1_ps(product_scale)), acc);
  return _mm256_fmadd_ps(dmn, _mm256_set1_ps(min_weight(x_scale, q4_start)), acc);
}

// Sub-block j's codes in one 32-byte half of a chunk's value vector (`values`): its low nibbles
// for an even j, its high nibbles shifted down for an odd one, and for Q5_K bit j of the same
// half of the high-bit vector (`qh`) as bit 4: 0..15 (Q5_K: 0..31).
template <bool kQ5>
G4_Q8_TARGET inline __m256i q45k_codes(const std::byte* values, const std::byte* qh, int j) {
  const __m256i n4 = _mm256_set1_epi8(0x0F);
  __m256i codes = _mm256_and_si256(_mm256_srl_epi16(load256(values), _mm_cvtsi32_si128(4 * (j % 2))), n4);
  if constexpr (kQ5) {
    const __m256i fifth = _mm256_and_si256(_mm256_srl_epi16(load256(qh), _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
    codes = _mm256_or_si256(codes, _mm256_slli_epi16(fifth, 4));
  }
  return codes;
}

// The codes (0..63) of part c (0..3) of one 32-byte half of a Q6_K_R16 value triple (vec: its
// first vector's half; + 64 the second's, + 128 the high bits'): value 128h + 32c + 4v + k of each
// row takes nibble c / 2 of vector c % 2 and bits 2c, 2c + 1 of the third (row_interleave.h).
G4_Q8_TARGET inline __m256i q6k_codes(const std::byte* vec, int c) {
  const __m256i low = _mm256_srl_epi16(load256(vec + 64 * (c % 2)), _mm_cvtsi32_si128(4 * (c / 2)));
  const __m256i high = _mm256_srl_epi16(load256(vec + 128), _mm_cvtsi32_si128(2 * c));
  return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi8(0x0F)),
                         _mm256_slli_epi16(_mm256_and_si256(high, _mm256_set1_epi8(0x03)), 4));
}

// Sub-block i's d·sc_i of column s (at `col`) for the rows of `half`, in f32.
G4_Q8_TARGET inline __m256 q6k_scale(const std::byte* col, int64_t s, int i, int half) {
  const __m128i sc = load64(col + q6k_scales_at(s) + 16 * uint64_t(i) + 8 * uint64_t(half));
  const __m256 d = halves8_at(col + q6k_d_at(s) + 16 * uint64_t(half));
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
}

// Prefill's f32 accumulators, [group][half][token][row], kept in L1: each is read and written
// once per sub-block, against 8 products per token, and the 16 registers hold the sums instead.
template <int G>
using PanelAcc = float[G][2][kPanelTokens][8];

// The panel's outputs: token c of group g to y[c · ldy + 16g ..], for the first `count` tokens.
template <int G>
G4_Q8_TARGET inline void store_panel(const PanelAcc<G>& acc, float* y, int64_t ldy, int count) {
  for (int g = 0; g < G; ++g)
    for (int half = 0; half < 2; ++half)
      for (int c = 0; c < count; ++c)
        _mm256_storeu_ps(y + c * ldy + 16 * g + 8 * half, _mm256_load_ps(acc[g][half][c]));
}

// Decode: G groups side by side (G weight streams) x the one token; each 512-byte chunk (sub-blocks
// 2k, 2k + 1) one half at a time, its lines read from L1 the second time. Each chunk requests its
// stream's quarter column kAhead further on, a line per vector pair read, past the group's end in
// the group it reads next (as gemm_kquant_interleaved.cpp).
template <int G, bool kQ5>
G4_Q8_TARGET void decode_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, float* y) {
  constexpr uint64_t kColumn = q45k_column_bytes<kQ5>, kQuarter = kColumn / 4;
  constexpr uint64_t kAhead = kquant_decode_prefetch_bytes(kColumn);
  static_assert(kQuarter <= 16 * 64, "a line per slot: 2 halves x 8 vectors");
  const int64_t supers = a.in / kSuperBlock;
  __m256 acc[G][2];
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kColumn;
    alignas(32) uint8_t scales[G][256];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) unpack_column_scales(col + uint64_t(g) * group_bytes, scales[g]);
    for (int k = 0; k < 4; ++k) {
      const uint64_t ahead = stream_prefetch_offset(uint64_t(s) * kColumn + kQuarter * uint64_t(k) + kAhead,
                                                    group_bytes, G);
      const int64_t b0 = 8 * s + 2 * k;  // low nibbles: block b0, high ones: b0 + 1
      const int8_t* x0 = a.q.data() + b0 * kQ8Block;
      #pragma GCC unroll 8
      for (int half = 0; half < 2; ++half) {
        __m256i lo[G], hi[G];
        #pragma GCC unroll 8
        for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int v = 0; v < 8; v += 2) {
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g)
            for (uint64_t m = uint64_t(8 * half + v); m < uint64_t(8 * half + v + 2); ++m)
              if (64 * m < kQuarter)
                _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + 64 * m),
                             _MM_HINT_T0);
          const __m256i xl0 = broadcast4(x0 + 4 * v), xl1 = broadcast4(x0 + 4 * v + 4);
          const __m256i xh0 = broadcast4(x0 + 32 + 4 * v), xh1 = broadcast4(x0 + 36 + 4 * v);
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g) {
            const std::byte* gc = col + uint64_t(g) * group_bytes + 64 * uint64_t(v) + 32 * uint64_t(half);
            const std::byte *vec = gc + kQ4KValues + 512 * uint64_t(k), *qh = gc + kQ5KHighBits;
            lo[g] = dot2(lo[g], q45k_codes<kQ5>(vec, qh, 2 * k), xl0, q45k_codes<kQ5>(vec + 64, qh + 64, 2 * k), xl1);
            hi[g] = dot2(hi[g], q45k_codes<kQ5>(vec, qh, 2 * k + 1), xh0,
                         q45k_codes<kQ5>(vec + 64, qh + 64, 2 * k + 1), xh1);
          }
        }
        #pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const std::byte* gc = col + uint64_t(g) * group_bytes;
          __m256 dsc, dmn;
          sub_block_scales(gc, scales[g], 2 * k, half, dsc, dmn);
          acc[g][half] = accumulate(acc[g][half], lo[g], dsc, dmn, a.scale[size_t(b0)], a.q4_start[size_t(b0)], false);
          sub_block_scales(gc, scales[g], 2 * k + 1, half, dsc, dmn);
          acc[g][half] = accumulate(acc[g][half], hi[g], dsc, dmn, a.scale[size_t(b0 + 1)],
                                    a.q4_start[size_t(b0 + 1)], !kQ5);
        }
      }
    }
  }
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    _mm256_storeu_ps(y + 16 * g, acc[g][0]);
    _mm256_storeu_ps(y + 16 * g + 8, acc[g][1]);
  }
}

// Prefill: G groups (1 or 2) x one panel of kPanelTokens tokens (`count` of them real), one 8-row
// half x the panel at a time: each code vector meets 6 tokens.
template <int G, bool kQ5>
G4_Q8_TARGET void prefill_q4k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, int64_t t, float* y,
                              int64_t ldy, int count) {
  constexpr int C = int(kPanelTokens);
  constexpr uint64_t kColumn = q45k_column_bytes<kQ5>;
  const int64_t supers = a.in / kSuperBlock;
  const size_t first = a.panel_cell(t, 0);  // t starts a panel; block b's cells follow at first + b·C
  alignas(32) PanelAcc<G> acc = {};
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kColumn;
    alignas(32) uint8_t scales[G][256];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) unpack_column_scales(col + uint64_t(g) * group_bytes, scales[g]);
    for (int j = 0; j < 8; ++j) {
      const size_t cell = first + size_t(8 * s + j) * C;
      const int8_t* xq = a.panel_q.data() + cell * kQ8Block;
      for (int g = 0; g < G; ++g)
        for (int half = 0; half < 2; ++half) {
          const std::byte* gc = col + uint64_t(g) * group_bytes;
          const std::byte* vec = gc + kQ4KValues + 512 * uint64_t(j / 2) + 32 * uint64_t(half);
          const std::byte* qh = gc + kQ5KHighBits + 32 * uint64_t(half);
          __m256i sum[C];
          #pragma GCC unroll 8
          for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
          #pragma GCC unroll 8
          for (int v = 0; v < 8; v += 2) {
            const __m256i w0 = q45k_codes<kQ5>(vec + 64 * v, qh + 64 * v, j);
            const __m256i w1 = q45k_codes<kQ5>(vec + 64 * v + 64, qh + 64 * v + 64, j);
            #pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
              const int8_t* x = xq + c * kQ8Block + 4 * v;
              sum[c] = dot2(sum[c], w0, broadcast4(x), w1, broadcast4(x + 4));
            }
          }
          __m256 dsc, dmn;
          sub_block_scales(gc, scales[g], j, half, dsc, dmn);
          #pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            float* out = acc[g][half][c];
            const size_t at = cell + size_t(c);
            _mm256_store_ps(out, accumulate(_mm256_load_ps(out), sum[c], dsc, dmn, a.panel_scale[at],
                                            a.panel_q4_start[at], !kQ5 && j % 2));
          }
        }
    }
  }
  store_panel<G>(acc, y, ldy, count);
}

// Q6_K decode: G groups side by side x the one token; per quarter column (h, j) one part c of one
// half at a time, so that the sums of G groups fit the registers; the quarter's value triples are
// read from L1 after the first part. Prefetch as decode_q4k, a line per slot.
template <int G>
G4_Q8_TARGET void decode_q6k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, float* y) {
  constexpr uint64_t kQuarter = kQ6KColumnBytes / 4, kAhead = kquant_decode_prefetch_bytes(kQ6KColumnBytes);
  static_assert(kQuarter <= 16 * 64, "a line per slot: 2 halves x 4 parts x 2 vector pairs");
  const int64_t supers = a.in / kSuperBlock;
  __m256 acc[G][2];
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ6KColumnBytes;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j) {
        const uint64_t ahead = stream_prefetch_offset(
            uint64_t(s) * kQ6KColumnBytes + kQuarter * uint64_t(2 * h + j) + kAhead, group_bytes, G);
        // Value triple v = 4j + u at + 192u of `values`; part c's activations at xh + 32c.
        const std::byte* values = col + q6k_values_at(s) + 1536 * uint64_t(h) + 192 * uint64_t(4 * j);
        const int8_t* xh = a.q.data() + (8 * s + 4 * h) * kQ8Block + 16 * j;
        #pragma GCC unroll 8
        for (int half = 0; half < 2; ++half)
          for (int c = 0; c < 4; ++c) {
            const size_t b = size_t(8 * s + 4 * h + c);
            __m256i sum[G];
            #pragma GCC unroll 8
            for (int g = 0; g < G; ++g) sum[g] = _mm256_set1_epi32(a.q6_start[2 * b + size_t(j)]);
            #pragma GCC unroll 8
            for (int u = 0; u < 4; u += 2) {
              const uint64_t line = uint64_t(8 * half + 2 * c + u / 2);
              #pragma GCC unroll 8
              for (int g = 0; g < G; ++g)
                if (64 * line < kQuarter)
                  _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + 64 * line),
                               _MM_HINT_T0);
              const __m256i x0 = broadcast4(xh + 32 * c + 4 * u), x1 = broadcast4(xh + 32 * c + 4 * u + 4);
              #pragma GCC unroll 8
              for (int g = 0; g < G; ++g) {
                const std::byte* vec = values + uint64_t(g) * group_bytes + 192 * uint64_t(u) + 32 * uint64_t(half);
                sum[g] = dot2(sum[g], q6k_codes(vec, c), x0, q6k_codes(vec + 192, c), x1);
              }
            }
            #pragma GCC unroll 8
            for (int g = 0; g < G; ++g) {
              const __m256 dsc = q6k_scale(col + uint64_t(g) * group_bytes, s, 8 * h + 2 * c + j, half);
              const __m256 product = _mm256_mul_ps(dsc, _mm256_set1_ps(a.scale[b]));
              acc[g][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[g]), product, acc[g][half]);
            }
          }
      }
  }
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    _mm256_storeu_ps(y + 16 * g, acc[g][0]);
    _mm256_storeu_ps(y + 16 * g + 8, acc[g][1]);
  }
}

// Q6_K prefill: G groups (1 or 2) x one panel, one half x the panel per part c of each quarter
// (h, j); starts from the activations' panel_q6_start, as the AVX-512 kernel.
template <int G>
G4_Q8_TARGET void prefill_q6k(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, int64_t t, float* y,
                              int64_t ldy, int count) {
  constexpr int C = int(kPanelTokens);
  const int64_t supers = a.in / kSuperBlock;
  const size_t first = a.panel_cell(t, 0);
  alignas(32) PanelAcc<G> acc = {};
  for (int64_t s = 0; s < supers; ++s) {
    const std::byte* col = w + uint64_t(s) * kQ6KColumnBytes;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j)
        for (int c = 0; c < 4; ++c) {
          const size_t cell = first + size_t(8 * s + 4 * h + c) * C;  // activation block b's cells
          const int8_t* xq = a.panel_q.data() + cell * kQ8Block + 16 * j;
          for (int g = 0; g < G; ++g)
            for (int half = 0; half < 2; ++half) {
              const std::byte* gc = col + uint64_t(g) * group_bytes;
              const std::byte* vec =
                  gc + q6k_values_at(s) + 1536 * uint64_t(h) + 192 * uint64_t(4 * j) + 32 * uint64_t(half);
              __m256i sum[C];
              #pragma GCC unroll 8
              for (int k = 0; k < C; ++k)
                sum[k] = _mm256_set1_epi32(a.panel_q6_start[(cell + size_t(k)) * 2 + size_t(j)]);
              #pragma GCC unroll 8
              for (int u = 0; u < 4; u += 2) {
                const __m256i w0 = q6k_codes(vec + 192 * u, c), w1 = q6k_codes(vec + 192 * u + 192, c);
                #pragma GCC unroll 8
                for (int k = 0; k < C; ++k) {
                  const int8_t* x = xq + k * kQ8Block + 4 * u;
                  sum[k] = dot2(sum[k], w0, broadcast4(x), w1, broadcast4(x + 4));
                }
              }
              const __m256 dsc = q6k_scale(gc, s, 8 * h + 2 * c + j, half);
              #pragma GCC unroll 8
              for (int k = 0; k < C; ++k) {
                float* out = acc[g][half][k];
                const __m256 product = _mm256_mul_ps(dsc, _mm256_set1_ps(a.panel_scale[cell + size_t(k)]));
                _mm256_store_ps(out, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[k]), product, _mm256_load_ps(out)));
              }
            }
        }
  }
  store_panel<G>(acc, y, ldy, count);
}

// This tier's kernels, for the walk in gemm_kquant_interleaved_256.cpp.
constexpr KQuantR16Kernels256 kernels() {
  return {{{decode_q4k<1, false>, decode_q4k<1, true>, decode_q6k<1>},
           {decode_q4k<2, false>, decode_q4k<2, true>, decode_q6k<2>},
           {decode_q4k<4, false>, decode_q4k<4, true>, decode_q6k<4>}},
          {{prefill_q4k<1, false>, prefill_q4k<1, true>, prefill_q6k<1>},
           {prefill_q4k<2, false>, prefill_q4k<2, true>, prefill_q6k<2>}}};
}

}  // namespace
}  // namespace g4::ops::G4_Q8_NS
