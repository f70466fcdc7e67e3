#include "ops/matmul/gemm_q8.h"

#include <iterator>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops/matmul/gemm_kquant.h"
#include "ops/matmul/gemm_q8_avx2.h"
#include "ops/matmul/gemm_q8_neon.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"

#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

namespace {
// Every tier's entry refuses a format its kernels cannot read, naming both.
void refuse_unread(DType dtype) {
  if (!int8_kernel_reads(dtype))
    throw Error("gemm_q8_rows: the " + std::string(int8_dot_name(int8_kernel_tier())) + " int8 kernels do not read " +
                std::string(dtype_name(dtype)) + " weights");
}
}  // namespace

#if defined(__x86_64__)
namespace {

inline uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// [d0 ×8, d1 ×8] as f32 from two f16 block scales (h1 = 0 for an absent second block).
// Each scale broadcast to 8 halves (VPBROADCASTW), then one conversion of all 16 (fewer
// instructions than packing both into a scalar first; no measurable speed difference here).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C inline __m512 pair_weight_scales(uint16_t h0, uint16_t h1) {
  const __m128i a = _mm_set1_epi16(short(h0)), b = _mm_set1_epi16(short(h1));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}

// Q8_0 block: f16 d, 32 × int8. Two blocks' values as 64 bytes (upper half zero when absent).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C inline __m512i load_q8_pair(const std::byte* b0, bool second) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
  const __m256i hi = second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + q8_0::kBlockBytes + q8_0::kQsAt))
                            : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Q4_0 block: f16 d, 16 bytes; value i = low nibble of byte i, value 16+i = high nibble.
// Two blocks' 64 nibbles as unsigned bytes 0..15 in value order.
G4_TARGET_AVX512F_BW_VL_VNNI_F16C inline __m512i load_q4_pair(const std::byte* b0, bool second) {
  const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2));
  const __m128i x1 = second ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + q4_0::kBlockBytes + q4_0::kQsAt))
                            : _mm_setzero_si128();
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1);  // [q0 | q1]
  __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(both), _mm256_srli_epi16(both, 4), 1);
  z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));  // [q0, q0>>4, q1, q1>>4]
  return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}

// Vector j (64 bytes) of one block column in each of G groups, `group_bytes` apart from `values`:
// Q4 its low and high nibbles as bytes 0..15 in v0 and v1, Q8 the bytes themselves in v0.
template <int G, bool kQ4>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C inline void load_group_vectors(const std::byte* values, uint64_t group_bytes, int j,
                                                                 __m512i* v0, __m512i* v1) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    const __m512i raw = _mm512_loadu_si512(values + uint64_t(g) * group_bytes + 64 * j);
    v0[g] = kQ4 ? _mm512_and_si512(raw, nibble) : raw;
    if constexpr (kQ4) v1[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
  }
}

// R weight rows × C tokens. Per (row, token) and per pair of blocks: one exact int32 product
// (VPDPBUSD), one conversion, one scale, one FMA, in the same order for every R and C.
template <int R, int C, bool kQ4>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C void tile(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t,
                                            float* y, int64_t ldy) {
  constexpr uint64_t kBlockBytes = kQ4 ? q4_0::kBlockBytes : q8_0::kBlockBytes;
  const int64_t blocks = a.in / kQ8Block, pairs = a.pairs(), in = a.in;
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m512 acc[R][C];
  x86::zero_tile<R, C>(acc);
  for (int64_t p = 0; p < pairs; ++p) {
    const bool second = 2 * p + 1 < blocks;
    __m512i xv[C];
    __m512 xs[C];
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const int8_t* q = a.q.data() + (t + c) * in + p * 64;
      xv[c] = second ? _mm512_loadu_si512(q) : _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      if (!second) xv[c] = _mm512_inserti64x4(xv[c], _mm256_setzero_si256(), 1);
      xs[c] = _mm512_loadu_ps(a.pair_scale.data() + ((t + c) * pairs + p) * 16);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* b0 = w + r * rb + uint64_t(2 * p) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(b0) + prefetch, _MM_HINT_T0);
      const __m512 ws = pair_weight_scales(load_u16(b0), second ? load_u16(b0 + kBlockBytes) : uint16_t(0));
      if constexpr (kQ4) {
        const __m512i wv = load_q4_pair(b0, second);
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const __m512i bias = _mm512_loadu_si512(a.q4_bias.data() + ((t + c) * pairs + p) * 16);
          const __m512i s = _mm512_dpbusd_epi32(bias, wv, xv[c]);  // Σ (n − 8)·q per block
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, xs[c]), acc[r][c]);
        }
      } else {
        const __m512i wv = load_q8_pair(b0, second);
        const __m512i wabs = _mm512_abs_epi8(wv);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          // w·x = |w|·(sign(w)·x): VPDPBUSD multiplies unsigned by signed bytes.
          const __m512i sx = _mm512_mask_sub_epi8(xv[c], neg, _mm512_setzero_si512(), xv[c]);
          const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, sx);
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, xs[c]), acc[r][c]);
        }
      }
    }
  }
  x86::store_tile_sums<R, C>(acc, y, ldy);
}

using TileFn = RowTileFn;

// Q8_0_R16 / Q4_0_R16 (row_interleave.h): per block column, (16-row group, token) pair, the int32
// sum starts at −offset·Σq (offset 128 for the offset-binary Q8 bytes, 8 for Q4 codes), takes 8
// VPDPBUSD of 64 weight bytes x 4 broadcast activation bytes (in vector order; exact), and is
// then scaled into the row's f32 lane: acc += sum · (d_w · d_x), blocks in order. Decode and
// prefill below run these same steps per output, so a token's bits do not depend on the batch.

// Decode: G groups x the one token. Each group is one sequential stream. prefetch > 0: each
// group's block column `prefetch` bytes ahead is also requested into L1, the stream running on
// into the group G groups later (the one it reads in the next call); whether that pays depends
// on the core (ops::plan_decode_streaming). Not into the neighbouring group, which another
// stream of the same call is already reading (measured slower).
template <int G, bool kQ4>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C void decode16(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                float* y, uint64_t prefetch) {
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;  // one block column of a 16-row group
  const int64_t blocks = a.in / kQ8Block;
  const std::vector<int32_t>& starts = kQ4 ? a.q4_start : a.q8_start;
  __m512 acc[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* xq = a.q.data() + b * kQ8Block;
    __m512i s[G];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) s[g] = _mm512_set1_epi32(starts[size_t(b)]);
    if (prefetch) {
      // Past the end of its group a stream's prefetch continues in the groups this stream reads
      // next (G groups on each time), not in the neighbouring groups the other streams read.
      // (b · kColumnBytes: where column b's bytes begin, to within the 32 B the pairing moves them.)
      const uint64_t ahead = stream_prefetch_offset(uint64_t(b) * kColumnBytes + prefetch, group_bytes, G);
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        for (uint64_t o = 0; o < kColumnBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead + o), _MM_HINT_T0);
    }
    const uint64_t values = interleaved_values_at(kColumnBytes, blocks, b), scales = interleaved_scales_at(kColumnBytes, b);
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const std::byte* vec = w + uint64_t(g) * group_bytes + values;  // column b's first value vector
      if constexpr (kQ4) {
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i raw = _mm512_loadu_si512(vec + 64 * j);
          const __m512i lo = _mm512_and_si512(raw, nibble), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
          s[g] = _mm512_dpbusd_epi32(s[g], lo, _mm512_set1_epi32(x86::load_i32(xq + 4 * j)));
          s[g] = _mm512_dpbusd_epi32(s[g], hi, _mm512_set1_epi32(x86::load_i32(xq + 16 + 4 * j)));
        }
      } else {
        #pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          s[g] = _mm512_dpbusd_epi32(s[g], _mm512_loadu_si512(vec + 64 * j), _mm512_set1_epi32(x86::load_i32(xq + 4 * j)));
      }
    }
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const std::byte* d = w + uint64_t(g) * group_bytes + scales;  // column b's 16 f16 scales
      const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
      acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[g]), _mm512_mul_ps(ws, _mm512_set1_ps(a.scale[size_t(b)])), acc[g]);
    }
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + 16 * g, acc[g]);
}

// Prefill: G groups (1 or 2) x one panel of kPanelTokens tokens (6; `count` of them real), the
// panel's activation bytes, starts and scales each read through one pointer. The core issues
// more VPDPBUSD than loads, and every product needs a broadcast activation load, so the tile
// reuses each broadcast across 2 groups and each weight vector across 6 tokens (24 accumulators
// in registers; the fastest shape measured).
// C: the panel's real tokens (1..6). The activations keep their 6-token panel layout (stride P);
// a panel of fewer tokens (the tail of a prefill) computes only its own C lanes instead of 6,
// the same steps per token, so no bit changes. Up to kFewTokens tokens take few16 instead.
template <int G, bool kQ4, int C>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C void prefill16(const std::byte* w, uint64_t group_bytes, const Q8Activations& a,
                                                 int64_t t, float* y, int64_t ldy) {
  constexpr int P = int(kPanelTokens);
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;
  const int64_t blocks = a.in / kQ8Block;
  const size_t first = a.panel_cell(t, 0);  // t starts a panel
  const int8_t* xq = a.panel_q.data() + first * kQ8Block;
  const int32_t* start = (kQ4 ? a.panel_q4_start : a.panel_q8_start).data() + first;
  const float* xs = a.panel_scale.data() + first;
  __m512 acc[G][C];
  #pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b, xq += P * kQ8Block, start += P, xs += P) {
    const std::byte* values = w + interleaved_values_at(kColumnBytes, blocks, b);
    const std::byte* scales = w + interleaved_scales_at(kColumnBytes, b);
    __m512i s[G][C];
    #pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i s0 = _mm512_set1_epi32(start[c]);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) s[g][c] = s0;
    }
    // Vector j of every group, then each token's 4 bytes broadcast once into all G products.
    #pragma GCC unroll 8
    for (int j = 0; j < (kQ4 ? 4 : 8); ++j) {
      __m512i v0[G], v1[G];  // Q4: low and high nibbles of vector j; Q8: vector j
      load_group_vectors<G, kQ4>(values, group_bytes, j, v0, v1);
      #pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i x0 = _mm512_set1_epi32(x86::load_i32(xq + c * kQ8Block + 4 * j));
        #pragma GCC unroll 8
        for (int g = 0; g < G; ++g) s[g][c] = _mm512_dpbusd_epi32(s[g][c], v0[g], x0);
        if constexpr (kQ4) {
          const __m512i x1 = _mm512_set1_epi32(x86::load_i32(xq + c * kQ8Block + 16 + 4 * j));
          #pragma GCC unroll 8
          for (int g = 0; g < G; ++g) s[g][c] = _mm512_dpbusd_epi32(s[g][c], v1[g], x1);
        }
      }
    }
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + uint64_t(g) * group_bytes)));
      #pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[g][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[g][c]), _mm512_mul_ps(ws, _mm512_set1_ps(xs[c])), acc[g][c]);
    }
  }
  x86::store_group_panel<G, C>(acc, y, ldy, C);
}

// A few sequences decoding together (2 <= T <= kFewTokens): G groups side by side x all C
// tokens in one pass, each group one sequential stream as in decode, so each weight is read from
// memory once per step (7-8 tokens as a 6- and a 2-token panel read it twice, the first panel
// stalling on memory; 2-4 tokens as prefill16's pairs of groups ran at decode's pace without its
// streaming). C tokens from up to two panels (token c: panel c / P, lane c % P); per (token, row)
// the same steps as prefill16, so no bit changes. Each stream is requested `prefetch` bytes ahead,
// running on into the group it reads next (G groups on), not beyond `end`
// (DecodeStreaming::few_prefetch_bytes: without it 8 streams ran ~25% slower; on Zen 5 8 KiB did
// best of 2-16 KiB, on an AMX Xeon 2 KiB, docs/perf.md). G = 2 shares each activation broadcast
// between two groups' products (DecodeStreaming::few_groups); its 2 x C sums stay in memory
// (L1), as 2 x 8 of them with the products' registers do not fit in 32 (G = 1: in registers).
template <bool kQ4, int C, int G>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C void few_groups(const std::byte* w, const std::byte* end, const Q8Activations& a,
                                                  float* y, int64_t ldy, uint64_t prefetch) {
  constexpr int P = int(kPanelTokens);
  static_assert(C >= 2 && C <= 2 * P && (G == 1 || G == 2));
  constexpr uint64_t kColumnBytes = kQ4 ? kQ4ColumnBytes : kQ8ColumnBytes;
  const int64_t blocks = a.in / kQ8Block;
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(kQ4 ? DType::Q4_0 : DType::Q8_0, a.in);
  const int8_t* xq[2] = {a.panel_q.data(), a.panel_q.data() + a.panel_cell(P, 0) * kQ8Block};
  const int32_t* const starts = (kQ4 ? a.panel_q4_start : a.panel_q8_start).data();
  const int32_t* start[2] = {starts, starts + a.panel_cell(P, 0)};
  const float* xs[2] = {a.panel_scale.data(), a.panel_scale.data() + a.panel_cell(P, 0)};
  __m512 racc[G == 1 ? C : 1];                            // G = 1: [token] x 16 rows
  alignas(64) float macc[G == 1 ? 1 : G][G == 1 ? 1 : C][16];  // G = 2: [group, token, row]
  if constexpr (G == 1)
    #pragma GCC unroll 12
    for (int c = 0; c < C; ++c) racc[c] = _mm512_setzero_ps();
  else
    std::memset(macc, 0, sizeof macc);
  for (int64_t b = 0; b < blocks; ++b) {
    if (prefetch)
      #pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        // Past its group's end a stream's prefetch continues in the group it reads next, G on.
        // (The prefetch loop stays inline: in a helper function GCC 12 dropped the G = 2 ones.)
        const uint64_t ahead = stream_prefetch_offset(uint64_t(b) * kColumnBytes + prefetch, group_bytes, G);
        const std::byte* p = w + uint64_t(g) * group_bytes + ahead;
        if (p < end)
          #pragma GCC unroll 9
          for (uint64_t o = 0; o < kColumnBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
      }
    const uint64_t values = interleaved_values_at(kColumnBytes, blocks, b);
    const uint64_t cell = uint64_t(b) * P;  // block b of a panel
    __m512i s[G][C];
    #pragma GCC unroll 12
    for (int c = 0; c < C; ++c) {
      const __m512i s0 = _mm512_set1_epi32(start[c / P][cell + c % P]);
      #pragma GCC unroll 2
      for (int g = 0; g < G; ++g) s[g][c] = s0;
    }
    #pragma GCC unroll 8
    for (int j = 0; j < (kQ4 ? 4 : 8); ++j) {
      __m512i v0[G], v1[G];  // Q4: low and high nibbles of vector j; Q8: vector j
      load_group_vectors<G, kQ4>(w + values, group_bytes, j, v0, v1);
      #pragma GCC unroll 12
      for (int c = 0; c < C; ++c) {
        const int8_t* xc = xq[c / P] + (cell + c % P) * kQ8Block;
        const __m512i x0 = _mm512_set1_epi32(x86::load_i32(xc + 4 * j));
        #pragma GCC unroll 2
        for (int g = 0; g < G; ++g) s[g][c] = _mm512_dpbusd_epi32(s[g][c], v0[g], x0);
        if constexpr (kQ4) {
          const __m512i x1 = _mm512_set1_epi32(x86::load_i32(xc + 16 + 4 * j));
          #pragma GCC unroll 2
          for (int g = 0; g < G; ++g) s[g][c] = _mm512_dpbusd_epi32(s[g][c], v1[g], x1);
        }
      }
    }
    #pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(w + uint64_t(g) * group_bytes + interleaved_scales_at(kColumnBytes, b))));
      #pragma GCC unroll 12
      for (int c = 0; c < C; ++c) {
        const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(xs[c / P][cell + c % P]));
        if constexpr (G == 1) racc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[g][c]), scale, racc[c]);
        else _mm512_store_ps(macc[g][c], _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[g][c]), scale, _mm512_load_ps(macc[g][c])));
      }
    }
  }
  #pragma GCC unroll 2
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 12
    for (int c = 0; c < C; ++c) {
      if constexpr (G == 1) _mm512_storeu_ps(y + c * ldy, racc[c]);
      else _mm512_storeu_ps(y + g * kInterleaveRows + c * ldy, _mm512_load_ps(macc[g][c]));
    }
}

// The groups [w, end) of one thread's share, `side_by_side` (1 or 2) at a time, a last odd one alone.
template <bool kQ4, int C>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C void few16(const std::byte* w, const std::byte* end, const Q8Activations& a,
                                             float* y, int64_t ldy, uint64_t prefetch, int side_by_side) {
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(kQ4 ? DType::Q4_0 : DType::Q8_0, a.in);
  if (side_by_side >= 2)
    for (; w + 2 * group_bytes <= end; w += 2 * group_bytes, y += 2 * kInterleaveRows)
      few_groups<kQ4, C, 2>(w, end, a, y, ldy, prefetch);
  for (; w < end; w += group_bytes, y += kInterleaveRows) few_groups<kQ4, C, 1>(w, end, a, y, ldy, prefetch);
}

template <int G, bool kQ4>
using PrefillFn = void (*)(const std::byte*, uint64_t, const Q8Activations&, int64_t, float*, int64_t);

template <int G, bool kQ4>
PrefillFn<G, kQ4> prefill16_for(int count) {
  static constexpr PrefillFn<G, kQ4> kByCount[] = {prefill16<G, kQ4, 1>, prefill16<G, kQ4, 2>, prefill16<G, kQ4, 3>,
                                                   prefill16<G, kQ4, 4>, prefill16<G, kQ4, 5>, prefill16<G, kQ4, 6>};
  static_assert(std::size(kByCount) == size_t(kPanelTokens));
  return kByCount[count - 1];
}

void gemm_interleaved_rows(const Q8Activations& a, const std::byte* w, bool q4, int64_t o_begin, int64_t o_end, float* y,
                           int64_t ldy, DecodeStreaming decode) {
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(q4 ? DType::Q4_0 : DType::Q8_0, a.in);
  const int64_t g_begin = o_begin / kInterleaveRows, g_end = o_end / kInterleaveRows;
  if (a.T > 1 && a.T <= kFewTokens) {
    using Fn = void (*)(const std::byte*, const std::byte*, const Q8Activations&, float*, int64_t, uint64_t, int);
    static constexpr Fn kQ4ByCount[] = {few16<true, 2>, few16<true, 3>, few16<true, 4>,
                                        few16<true, 5>, few16<true, 6>, few16<true, 7>, few16<true, 8>};
    static constexpr Fn kQ8ByCount[] = {few16<false, 2>, few16<false, 3>, few16<false, 4>,
                                        few16<false, 5>, few16<false, 6>, few16<false, 7>, few16<false, 8>};
    static_assert(std::size(kQ4ByCount) == size_t(kFewTokens - 1));
    const Fn fn = (q4 ? kQ4ByCount : kQ8ByCount)[a.T - 2];
    fn(w + uint64_t(g_begin) * group_bytes, w + uint64_t(g_end) * group_bytes, a, y + g_begin * kInterleaveRows, ldy,
       decode.few_prefetch_bytes, decode.few_groups);
    return;
  }
  // Decode: decode.groups sequential streams side by side (whether more than one pays depends on
  // the core), then the remainder. Prefill: pairs of groups over blocks of token panels.
  walk_interleaved_groups(
      a.T, g_begin, g_end, decode_groups_for(decode, group_bytes),
      [&](int n, int64_t g) {
        using Fn = void (*)(const std::byte*, uint64_t, const Q8Activations&, float*, uint64_t);
        const Fn fn = n == 4   ? (q4 ? decode16<4, true> : decode16<4, false>)
                      : n == 2 ? (q4 ? decode16<2, true> : decode16<2, false>)
                               : (q4 ? decode16<1, true> : decode16<1, false>);
        fn(w + uint64_t(g) * group_bytes, group_bytes, a, y + g * kInterleaveRows, decode.prefetch_bytes);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        const std::byte* wg = w + uint64_t(g) * group_bytes;
        float* yt = y + t * ldy + g * kInterleaveRows;
        if (pair)
          (q4 ? prefill16_for<2, true>(count) : prefill16_for<2, false>(count))(wg, group_bytes, a, t, yt, ldy);
        else
          (q4 ? prefill16_for<1, true>(count) : prefill16_for<1, false>(count))(wg, group_bytes, a, t, yt, ldy);
      });
}

template <int R, bool kQ4>
constexpr TileFn tile_for(int c) {
  return c == 1 ? tile<R, 1, kQ4> : c == 2 ? tile<R, 2, kQ4> : c == 3 ? tile<R, 3, kQ4> : tile<R, 4, kQ4>;
}

template <bool kQ4>
TileFn pick(int r, int c) {
  switch (r) {
    case 1: return tile_for<1, kQ4>(c);
    case 2: return tile_for<2, kQ4>(c);
    case 3: return tile_for<3, kQ4>(c);
    default: return tile_for<4, kQ4>(c);
  }
}

}  // namespace

void gemm_q8_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                  int64_t ldy, DecodeStreaming decode) {
  const Int8Dot tier = int8_kernel_tier();
  refuse_unread(dtype);
  if (dtype_is_kquant(dtype)) {
    if (tier == Int8Dot::Avx512Vnni) gemm_kquant_rows(a, w, dtype, o_begin, o_end, y, ldy);
    else gemm_kquant_rows_256(a, w, dtype, o_begin, o_end, y, ldy, tier);
    return;
  }
  const unsigned needs = dtype_is_interleaved(dtype) ? (a.T > 1 ? kQ8Panels : 0u) : kQ8RowTiles;
  if ((a.layouts & needs) != needs)
    throw Error("gemm_q8_rows: " + std::string(dtype_name(dtype)) + " weights x " + std::to_string(a.T) +
                " tokens read the activations' " + (needs == kQ8Panels ? "token panels" : "row-tile scales") +
                ", which quantize_activations was not asked for");
  const bool wide = tier == Int8Dot::Avx512Vnni;
  if (dtype == DType::Q4_K_R16 || dtype == DType::Q5_K_R16 || dtype == DType::Q6_K_R16) {
    if (wide) gemm_kquant_interleaved_rows(a, w, dtype, o_begin, o_end, y, ldy, decode);
    else gemm_kquant_interleaved_rows_256(a, w, dtype, o_begin, o_end, y, ldy, decode, tier);
    return;
  }
  if (dtype_is_interleaved(dtype) && (o_begin % kInterleaveRows || o_end % kInterleaveRows))
    throw Error("gemm_q8_rows: rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) + ") of " +
                std::string(dtype_name(dtype)) + " weights must be whole groups of 16");
  if (!wide) {
    gemm_q8_rows_256(a, w, dtype, o_begin, o_end, y, ldy, decode, tier);
    return;
  }
  if (dtype_is_interleaved(dtype)) {
    gemm_interleaved_rows(a, w, dtype == DType::Q4_0_R16, o_begin, o_end, y, ldy, decode);
    return;
  }
  const bool q4 = dtype == DType::Q4_0;
  const uint64_t rb = row_bytes(dtype, a.in);
  for_each_row_tile(a.T, o_begin, o_end, [&](int64_t o, int r, int64_t t, int c) {
    (q4 ? pick<true>(r, c) : pick<false>(r, c))(w + uint64_t(o) * rb, rb, a, t, y + t * ldy + o, ldy);
  });
}

#else  // not x86-64: the NEON tier (aarch64) or none

void gemm_q8_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                  int64_t ldy, DecodeStreaming) {
  refuse_unread(dtype);
  gemm_q8_rows_neon(a, w, dtype, o_begin, o_end, y, ldy);
}

#endif

}  // namespace g4::ops
