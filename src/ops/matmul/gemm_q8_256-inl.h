// The Q8_0 / Q4_0 int8 kernels on 256-bit vectors (gemm_q8_avx2.h), written once and compiled
// once per tier: gemm_q8_256.cpp includes this file with G4_Q8_NS (the tier's namespace),
// G4_Q8_TARGET (its target attribute) and G4_Q8_VNNI (1: AVX-VNNI's VPDPBUSD, 0: AVX2's
// VPMADDUBSW + VPMADDWD) defined, so the AVX2 instantiation never holds an AVX-VNNI instruction.
// No include guard, on purpose.
//
// A 16-row group of Q8_0_R16 / Q4_0_R16 (platform/row_interleave.h) is two 8-row halves: bytes
// [0, 32) of each 64-byte value vector are rows 0-7, [32, 64) rows 8-15, and the 16 f16 scales of
// a column split the same way. Per output (row, token), per block in order: the exact int32 sum,
// then acc = fma(float(sum), d_w · d_x, acc), the steps of the AVX512_VNNI kernels (gemm_q8.cpp).
#include "ops/isa/lanes_256-inl.h"

namespace g4::ops::G4_Q8_NS {

// The int32 sums start at 0 where AVX2 reads Q8_0's bytes as signed weights, else at the block's
// −offset·Σq (gemm_q8_avx2.h).
template <bool kQ4>
inline constexpr bool kStartsAtZero = !kQ4 && !G4_Q8_VNNI;

// One value vector's 8-row half, unpacked once for every token that meets it: Q4 its low and
// high nibbles (codes 0..15); Q8 on AVX2 |w| and w (w = byte XOR 0x80: the weight, signed), whose
// sign the activations take, so a pair is at most 2 x 128 x 127 = 32512; Q8 on VNNI the bytes as
// stored (offset binary, the sums starting at −128·Σq).
template <bool kQ4>
struct Codes {
  __m256i a, b;
  G4_Q8_TARGET static Codes of(__m256i raw) {
    if constexpr (kQ4) {
      const __m256i nibble = _mm256_set1_epi8(0x0F);
      return {_mm256_and_si256(raw, nibble), _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble)};
    } else {
#if G4_Q8_VNNI
      return {raw, raw};
#else
      const __m256i wv = _mm256_xor_si256(raw, _mm256_set1_epi8(char(0x80)));
      return {_mm256_abs_epi8(wv), wv};
#endif
    }
  }
};

// One 8-row half's block sum for one token, built vector by vector. AVX2 Q4: the pair products of
// all its vectors summed in int16 (eight of at most 2 x 15 x 127: 30480, no saturation) and
// widened once; otherwise int32 sums from the start on. The int16 adds are VPADDSW: they never
// saturate here, so the sums are VPADDW's, but GCC does not re-associate them, where a chain of
// VPADDW became a tree holding every pair product at once, spilled to the stack. AVX2 Q8's int32
// adds stay a chain behind in_order for the same reason.
template <bool kQ4>
struct HalfSum {
  __m256i v;
  G4_Q8_TARGET void begin(int32_t start) {
    v = (kQ4 && !G4_Q8_VNNI) || kStartsAtZero<kQ4> ? _mm256_setzero_si256() : _mm256_set1_epi32(start);
  }
  // One vector's codes against its activation quads: Q4 x0 for the low nibbles, x1 for the high
  // ones; Q8 x0.
  G4_Q8_TARGET void add(const Codes<kQ4>& w, __m256i x0, __m256i x1) {
    if constexpr (kQ4) {
#if G4_Q8_VNNI
      v = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(v, w.a, x0), w.b, x1);
#else
      v = _mm256_adds_epi16(v, _mm256_adds_epi16(_mm256_maddubs_epi16(w.a, x0), _mm256_maddubs_epi16(w.b, x1)));
#endif
    } else {
#if G4_Q8_VNNI
      v = _mm256_dpbusd_avx_epi32(v, w.a, x0);
#else
      v = in_order(_mm256_add_epi32(v, pair_sums(_mm256_maddubs_epi16(w.a, _mm256_sign_epi8(x0, w.b)))));
#endif
    }
  }
  G4_Q8_TARGET __m256i sum(int32_t start) const {
    if constexpr (kQ4 && !G4_Q8_VNNI) return _mm256_add_epi32(_mm256_set1_epi32(start), pair_sums(v));
    return v;
  }
};

// The exact int32 sums of 8 rows x N tokens over one block column: s[c] lane r = Σ_i w[r][i] ·
// x[c][i] (with the block's −offset·Σq where the codes are offset). vec: the half's first value
// vector (vector j at vec + 64j); x[c]: token c's 32 activation bytes; start[c]: its −offset·Σq.
// Each vector is unpacked once for the N tokens.
template <bool kQ4, int N>
G4_Q8_TARGET inline void half_sums(const std::byte* vec, const int8_t* const* x, const int32_t* const* start,
                                   __m256i* s) {
  HalfSum<kQ4> h[N];
  #pragma GCC unroll 8
  for (int c = 0; c < N; ++c) h[c].begin(*start[c]);
  #pragma GCC unroll 8
  for (int j = 0; j < (kQ4 ? 4 : 8); ++j) {
    const Codes<kQ4> w = Codes<kQ4>::of(load256(vec + 64 * j));
    #pragma GCC unroll 8
    for (int c = 0; c < N; ++c) {
      const __m256i x0 = broadcast4(x[c] + 4 * j);
      h[c].add(w, x0, kQ4 ? broadcast4(x[c] + 16 + 4 * j) : x0);
    }
  }
  #pragma GCC unroll 8
  for (int c = 0; c < N; ++c) s[c] = h[c].sum(*start[c]);
}


// acc + float(sum) · (d_w · d_x) per row lane: the scale product first, then one FMA.
G4_Q8_TARGET inline __m256 scale_sums(__m256 acc, __m256i sum, const std::byte* scales8, float x_scale) {
  const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales8)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(ws, _mm256_set1_ps(x_scale)), acc);
}

// Decode: G groups x the one token, each group one sequential stream. Per block column the value
// vectors go in order, each activation quad broadcast once for the G x 2 halves it meets (the
// sums in registers: 2G of them); software prefetch as the AVX-512 decode16 (gemm_q8.cpp).
template <int G, bool kQ4>
G4_Q8_TARGET void decode16(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, float* y,
                           uint64_t prefetch) {
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;
  const int64_t blocks = a.in / kQ8Block;
  const int32_t* starts = (kQ4 ? a.q4_start : a.q8_start).data();
  __m256 acc[G][2];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    if (prefetch) {
      const uint64_t ahead = stream_prefetch_offset(uint64_t(b) * kColumnBytes + prefetch, group_bytes, G);
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        #pragma GCC unroll 9
        for (uint64_t o = 0; o < kColumnBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + o), _MM_HINT_T0);
    }
    const std::byte* values = w + interleaved_values_at(kColumnBytes, blocks, b);
    const int8_t* xq = a.q.data() + b * kQ8Block;
    HalfSum<kQ4> s[G][2];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) s[g][0].begin(starts[b]), s[g][1].begin(starts[b]);
    #pragma GCC unroll 8
    for (int j = 0; j < (kQ4 ? 4 : 8); ++j) {
      const __m256i x0 = broadcast4(xq + 4 * j), x1 = kQ4 ? broadcast4(xq + 16 + 4 * j) : x0;
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) s[g][h].add(Codes<kQ4>::of(load256(values + uint64_t(g) * group_bytes + 64 * j + 32 * h)), x0, x1);
    }
    const uint64_t scales = interleaved_scales_at(kColumnBytes, b);
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        acc[g][h] = scale_sums(acc[g][h], s[g][h].sum(starts[b]), w + uint64_t(g) * group_bytes + scales + 16 * h,
                               a.scale[size_t(b)]);
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    _mm256_storeu_ps(y + 16 * g, acc[g][0]);
    _mm256_storeu_ps(y + 16 * g + 8, acc[g][1]);
  }
}

// Tokens [c0, c0 + N) of one group's block column b, both halves, into the sums in macc
// ([C][16] f32 per group: one L1 line per token, as the AVX-512 few16's G = 2 sums). Token c's
// block b sits in the token panels (Q8Activations::panel_*) at cell first[c] + b · kPanelTokens.
template <bool kQ4, int N>
G4_Q8_TARGET inline void column_tokens(const std::byte* group, uint64_t values, uint64_t scales, int64_t b,
                                       const Q8Activations& a, const size_t* first, int c0, float (*macc)[16]) {
  const int32_t* const starts = (kQ4 ? a.panel_q4_start : a.panel_q8_start).data();
  const int8_t* x[N];
  const int32_t* start[N];
  #pragma GCC unroll 8
  for (int c = 0; c < N; ++c) {
    const size_t cell = first[c0 + c] + size_t(b) * size_t(kPanelTokens);
    x[c] = a.panel_q.data() + cell * kQ8Block;
    start[c] = starts + cell;
  }
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256i s[N];
    half_sums<kQ4, N>(group + values + 32 * h, x, start, s);
    #pragma GCC unroll 8
    for (int c = 0; c < N; ++c) {
      float* m = macc[c0 + c] + 8 * h;
      const float xs = a.panel_scale[first[c0 + c] + size_t(b) * size_t(kPanelTokens)];
      _mm256_store_ps(m, scale_sums(_mm256_load_ps(m), s[c], group + scales + 16 * h, xs));
    }
  }
}

// One group x C tokens (1..8, from the token panels): the block columns in order, up to 4 tokens
// per pass over a column while its bytes sit in L1. Serves a few streams decoding together
// (weights streamed once for all, `prefetch` bytes ahead, never past `end`); prefill panels take
// panel16.
template <bool kQ4, int C>
G4_Q8_TARGET void group_tokens(const std::byte* group, const std::byte* end, const Q8Activations& a, int64_t t0,
                               float* y, int64_t ldy, uint64_t prefetch) {
  size_t first[C];
  for (int c = 0; c < C; ++c) first[c] = a.panel_cell(t0 + c, 0);
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;
  const int64_t blocks = a.in / kQ8Block;
  alignas(64) float macc[C][16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    if (prefetch) {
      const std::byte* p = group + uint64_t(b) * kColumnBytes + prefetch;
      if (p < end)
        for (uint64_t o = 0; o < kColumnBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    }
    const uint64_t values = interleaved_values_at(kColumnBytes, blocks, b), scales = interleaved_scales_at(kColumnBytes, b);
    if constexpr (C >= 4) column_tokens<kQ4, 4>(group, values, scales, b, a, first, 0, macc);
    if constexpr (C == 8) column_tokens<kQ4, 4>(group, values, scales, b, a, first, 4, macc);
    if constexpr (C % 4) column_tokens<kQ4, C % 4>(group, values, scales, b, a, first, C - C % 4, macc);
  }
  #pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    _mm256_storeu_ps(y + c * ldy, _mm256_load_ps(macc[c]));
    _mm256_storeu_ps(y + c * ldy + 8, _mm256_load_ps(macc[c] + 8));
  }
}

// One value vector's 8-row half (at vec) into the sums of the panel's kPanelTokens tokens, whose
// activation quads for it sit at x + 32c (Q4's high nibbles' 16 bytes further).
template <bool kQ4>
G4_Q8_TARGET inline void panel_vector(HalfSum<kQ4>* s, const std::byte* vec, const int8_t* x) {
  const Codes<kQ4> w = Codes<kQ4>::of(load256(vec));
  #pragma GCC unroll 8
  for (int c = 0; c < int(kPanelTokens); ++c) {
    const __m256i x0 = broadcast4_load(x + c * kQ8Block);
    s[c].add(w, x0, kQ4 ? broadcast4_load(x + c * kQ8Block + 16) : x0);
  }
}

// Prefill: one group x one panel of kPanelTokens tokens (`count` of them real; the panel's cells
// past T are zeros), one 8-row half x the 6 tokens at a time: each value vector is unpacked once
// for 6 tokens, whose block sums stay in registers (Q4 on AVX2: 6 int16 sums, 2 code vectors, the
// broadcasts), the f32 accumulators in L1. All of it in one function over one local accumulator
// array, so that nothing the stores write can alias the panel's bytes: split into functions over
// macc (group_tokens), GCC reloaded every scale and activation pointer per token and spilled the
// pair products. Per output the same steps as group_tokens and the AVX-512 prefill16.
template <bool kQ4>
G4_Q8_TARGET void panel16(const std::byte* group, const Q8Activations& a, int64_t t, float* y, int64_t ldy, int count) {
  constexpr int P = int(kPanelTokens);
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;
  const int64_t blocks = a.in / kQ8Block;
  const size_t first = a.panel_cell(t, 0);  // t starts a panel; block b's cells follow at first + b·P
  const int8_t* xq = a.panel_q.data() + first * kQ8Block;
  const int32_t* start = (kQ4 ? a.panel_q4_start : a.panel_q8_start).data() + first;
  const float* xs = a.panel_scale.data() + first;
  alignas(32) float acc[2][P][8] = {};
  for (int64_t b = 0; b < blocks; ++b, xq += P * kQ8Block, start += P, xs += P) {
    const std::byte* values = group + interleaved_values_at(kColumnBytes, blocks, b);
    const std::byte* scales = group + interleaved_scales_at(kColumnBytes, b);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      HalfSum<kQ4> s[P];
      #pragma GCC unroll 8
      for (int c = 0; c < P; ++c) s[c].begin(start[c]);
      if constexpr (kQ4) {
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) panel_vector<kQ4>(s, values + 64 * j + 32 * h, xq + 4 * j);
      } else {
        // Not unrolled: GCC re-associates an unrolled chain of int32 adds into a tree whose
        // partial sums spill (HalfSum's saturating int16 adds keep Q4's chain as written).
        #pragma GCC unroll 1
        for (int j = 0; j < 8; ++j) panel_vector<kQ4>(s, values + 64 * j + 32 * h, xq + 4 * j);
      }
      const __m256 ws = halves8_at(scales + 16 * h);
      #pragma GCC unroll 8
      for (int c = 0; c < P; ++c) {
        const __m256 product = _mm256_mul_ps(ws, _mm256_set1_ps(xs[c]));
        _mm256_store_ps(acc[h][c], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[c].sum(start[c])), product,
                                                   _mm256_load_ps(acc[h][c])));
      }
    }
  }
  for (int c = 0; c < count; ++c) {
    _mm256_storeu_ps(y + c * ldy, _mm256_load_ps(acc[0][c]));
    _mm256_storeu_ps(y + c * ldy + 8, _mm256_load_ps(acc[1][c]));
  }
}

// Row-major Q8_0 / Q4_0: R rows x C tokens, per (row, token) and block one 8-lane int32 product
// (lanes: the block's 8 quads), scaled and accumulated per lane, the lanes summed in one fixed
// order at the end (the same steps whatever R, C or the thread).
template <int R, int C, bool kQ4>
G4_Q8_TARGET void row_tile(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t, float* y, int64_t ldy) {
  constexpr uint64_t kBlockBytes = kQ4 ? q4_0::kBlockBytes : q8_0::kBlockBytes;
  const int64_t blocks = a.in / kQ8Block, pairs = a.pairs();
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m256 acc[R][C];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i xv[C];
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + (t + c) * a.in + b * kQ8Block));
    const size_t lane = size_t(b / 2) * 16 + size_t(b % 2) * 8;  // block b's 8 lanes in pair_scale, q4_bias
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + r * rb + uint64_t(b) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + prefetch, _MM_HINT_T0);
      uint16_t d;
      std::memcpy(&d, blk, 2);
      const __m256 ws = _mm256_set1_ps(_cvtsh_ss(d));
      __m256i codes, wv = _mm256_setzero_si256();
      if constexpr (kQ4) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q4_0::kQsAt));
        const __m128i nib = _mm_set1_epi8(0x0F);
        codes = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), nib), _mm_and_si128(packed, nib));
      } else {
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + q8_0::kQsAt));
        codes = _mm256_abs_epi8(wv);
      }
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const size_t cell = size_t((t + c) * pairs) * 16 + lane;
        __m256i s = kQ4 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q4_bias.data() + cell)) : _mm256_setzero_si256();
#if G4_Q8_VNNI
        s = _mm256_dpbusd_avx_epi32(s, codes, kQ4 ? xv[c] : _mm256_sign_epi8(xv[c], wv));
#else
        const __m256i p = _mm256_maddubs_epi16(codes, kQ4 ? xv[c] : _mm256_sign_epi8(xv[c], wv));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
        const __m256 xs = _mm256_loadu_ps(a.pair_scale.data() + cell);
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(ws, xs), acc[r][c]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[c * ldy + r] = sum8(acc[r][c]);
}

// This tier's kernels for Q4 or Q8 codes (Kernels256, gemm_q8_256.cpp).
template <bool kQ4>
Kernels256 kernels() {
  Kernels256 k{};
  k.decode[0] = decode16<1, kQ4>, k.decode[1] = decode16<2, kQ4>, k.decode[2] = decode16<4, kQ4>;
  k.tokens[0] = group_tokens<kQ4, 1>, k.tokens[1] = group_tokens<kQ4, 2>, k.tokens[2] = group_tokens<kQ4, 3>;
  k.tokens[3] = group_tokens<kQ4, 4>, k.tokens[4] = group_tokens<kQ4, 5>, k.tokens[5] = group_tokens<kQ4, 6>;
  k.tokens[6] = group_tokens<kQ4, 7>, k.tokens[7] = group_tokens<kQ4, 8>;
  k.panel = panel16<kQ4>;
  k.row[0][0] = row_tile<1, 1, kQ4>, k.row[0][1] = row_tile<1, 2, kQ4>;
  k.row[0][2] = row_tile<1, 3, kQ4>, k.row[0][3] = row_tile<1, 4, kQ4>;
  k.row[1][0] = row_tile<2, 1, kQ4>, k.row[1][1] = row_tile<2, 2, kQ4>;
  k.row[1][2] = row_tile<2, 3, kQ4>, k.row[1][3] = row_tile<2, 4, kQ4>;
  return k;
}

}  // namespace g4::ops::G4_Q8_NS
