// The int8 activations of the VPDPBUSD and AMX-INT8 products (Q8Activations, gemm_q8.h): each
// token's row quantized in blocks of 32 with one f32 scale per block, laid out as each kernel
// reads them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "ops/matmul/gemm_q8.h"
#include "platform/device.h"
#include "platform/error.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#endif

namespace g4::ops {

namespace {

// Σq of one block's values 0-15 and 16-31 (Q6_K's offset correction reads the halves).
struct HalfSums {
  int32_t lo = 0, hi = 0;
};

// One block of 32: q = clamp(nearbyint(x · 127/amax), ±127), returns the scale amax/127.
float quantize_block_scalar(const float* xb, int8_t* qb, HalfSums* sums) {
  float amax = 0;
  for (int i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(xb[i]));
  const float id = amax > 0 ? 127.0f / amax : 0.0f;
  *sums = {};
  for (int i = 0; i < kQ8Block; ++i) {
    // |x·id| <= 127 up to rounding; the clamp keeps a NaN-free input inside int8.
    qb[i] = int8_t(std::clamp(std::nearbyint(xb[i] * id), -127.0f, 127.0f));
    (i < kQ8Block / 2 ? sums->lo : sums->hi) += qb[i];
  }
  return amax / 127.0f;
}

#if defined(__x86_64__)
// 16 values: clamp(round_to_nearest_even(x · id), ±127) as int32.
G4_TARGET_AVX512F_BW_VL_VNNI_F16C inline __m512i quantize16(__m512 x, __m512 id) {
  const __m512 lim = _mm512_set1_ps(127.0f);
  const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(x, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim));
}

// The same arithmetic on AVX-512 (round to nearest even, as nearbyint in the default mode):
// bit-identical to the scalar block (tested). The 32 bytes leave in one store, so the copies
// into the kernels' layouts read them back whole (two 16-byte stores stalled those loads).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C float quantize_block_avx512(const float* xb, int8_t* qb, HalfSums* sums) {
  const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
  const __m512 m = _mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1));
  const float amax = _mm512_reduce_max_ps(m);
  const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
  const __m512i q0 = quantize16(x0, id), q1 = quantize16(x1, id);
  const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(q0)), _mm512_cvtsepi32_epi8(q1), 1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), q);
  sums->lo = _mm512_reduce_add_epi32(q0);
  sums->hi = _mm512_reduce_add_epi32(q1);
  return amax / 127.0f;
}

// 8 values: clamp(round_to_nearest_even(x · id), ±127) as int32 (AVX2).
G4_TARGET_AVX2_FMA_F16C inline __m256i quantize8(__m256 x, __m256 id) {
  const __m256 lim = _mm256_set1_ps(127.0f);
  const __m256 r = _mm256_round_ps(_mm256_mul_ps(x, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim));
}

G4_TARGET_AVX2_FMA_F16C inline int32_t sum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// The same arithmetic on AVX2 for the 256-bit int8 tiers, bit-identical to the scalar block
// (tested): the block's absmax, one scalar division as there, then 4 x 8 values.
G4_TARGET_AVX2_FMA_F16C float quantize_block_avx2(const float* xb, int8_t* qb, HalfSums* sums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 x[4], m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm256_loadu_ps(xb + 8 * i);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, x[i]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) q[i] = quantize8(x[i], id);
  // int32 -> int16 -> int8 packs work per 128-bit lane: the permute restores value order.
  const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
  const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), b);
  sums->lo = sum8_epi32(_mm256_add_epi32(q[0], q[1]));
  sums->hi = sum8_epi32(_mm256_add_epi32(q[2], q[3]));
  return amax / 127.0f;
}
#endif

}  // namespace

void size_activations(int64_t T, int64_t in, unsigned layouts, Q8Activations& a) {
  if (T < 1 || in < kQ8Block || in % kQ8Block)
    throw Error("size_activations: T " + std::to_string(T) + ", in " + std::to_string(in) +
                ": needs T >= 1 and in a positive multiple of " + std::to_string(kQ8Block));
  const int64_t blocks = in / kQ8Block, pairs = (blocks + 1) / 2;
  a.T = T;
  a.in = in;
  a.layouts = layouts & (T > 1 ? kQ8RowTiles | kQ8Panels | kQ8TokenTiles : kQ8RowTiles);  // one token needs no panel
  a.q.resize(size_t(T * in));
  a.scale.resize(size_t(T * blocks));
  a.q8_start.resize(size_t(T * blocks));
  a.q4_start.resize(size_t(T * blocks));
  a.q6_start.resize(size_t(2 * T * blocks));
  const size_t tiles = a.layouts & kQ8RowTiles ? size_t(T * pairs * 16) : 0;
  a.pair_scale.resize(tiles);
  a.q4_bias.resize(tiles);
  const int64_t panels = (T + kPanelTokens - 1) / kPanelTokens;
  const size_t cells = a.layouts & kQ8Panels ? size_t(panels * blocks * kPanelTokens) : 0;
  a.panel_q.resize(cells * kQ8Block);
  a.panel_q8_start.resize(cells);
  a.panel_q4_start.resize(cells);
  a.panel_q6_start.resize(2 * cells);
  a.panel_scale.resize(cells);
  const size_t tile_cells =
      a.layouts & kQ8TokenTiles ? size_t((T + kTileTokens - 1) / kTileTokens * blocks * kTileTokens) : 0;
  a.tile_q.resize(tile_cells * kQ8Block);
  a.tile_q8_start.resize(tile_cells);
  a.tile_q4_start.resize(tile_cells);
  a.tile_scale.resize(tile_cells);
  for (int64_t t = T; tile_cells && t % kTileTokens; ++t)  // the last token tile's cells past T
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t cell = a.tile_cell(t, b);
      std::memset(a.tile_q.data() + cell * kQ8Block, 0, kQ8Block);
      a.tile_q8_start[cell] = a.tile_q4_start[cell] = 0;
      a.tile_scale[cell] = 0.0f;
    }
  if (!cells) return;
  // The last panel's cells past T: zeros, so the tile's unused lanes compute 0 · 0.
  for (int64_t t = T; t < panels * kPanelTokens; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t cell = a.panel_cell(t, b);
      std::memset(a.panel_q.data() + cell * kQ8Block, 0, kQ8Block);
      a.panel_q8_start[cell] = a.panel_q4_start[cell] = a.panel_q6_start[2 * cell] = a.panel_q6_start[2 * cell + 1] = 0;
      a.panel_scale[cell] = 0.0f;
    }
}

namespace {

// Token t's block b into every layout a holds.
void quantize_cell(const float* x, int64_t t, int64_t b, bool simd, Q8Activations& a) {
  const int64_t in = a.in, blocks = in / kQ8Block, pairs = (blocks + 1) / 2;
  const float* xb = x + t * in + b * kQ8Block;
  int8_t* qb = a.q.data() + t * in + b * kQ8Block;
  HalfSums halves;
#if defined(__x86_64__)
  const float d = simd ? (gemm_q8_avx512() ? quantize_block_avx512(xb, qb, &halves) : quantize_block_avx2(xb, qb, &halves))
                       : quantize_block_scalar(xb, qb, &halves);
#else
  (void)simd;
  const float d = quantize_block_scalar(xb, qb, &halves);
#endif
  const int32_t sum = halves.lo + halves.hi;
  const size_t k = size_t(t * blocks + b);
  a.scale[k] = d;
  a.q8_start[k] = -128 * sum;
  a.q4_start[k] = -8 * sum;
  a.q6_start[2 * k] = -32 * halves.lo;
  a.q6_start[2 * k + 1] = -32 * halves.hi;
  if (a.layouts & kQ8RowTiles) {
    float* ps = a.pair_scale.data() + (t * pairs + b / 2) * 16 + (b % 2) * 8;
    std::fill(ps, ps + 8, d);
    a.q4_bias[size_t((t * pairs + b / 2) * 16 + (b % 2) * 8)] = -8 * sum;
  }
  if (a.layouts & kQ8Panels) {
    const size_t cell = a.panel_cell(t, b);
    std::memcpy(a.panel_q.data() + cell * kQ8Block, qb, kQ8Block);
    a.panel_q8_start[cell] = a.q8_start[k];
    a.panel_q4_start[cell] = a.q4_start[k];
    a.panel_q6_start[2 * cell] = a.q6_start[2 * k];
    a.panel_q6_start[2 * cell + 1] = a.q6_start[2 * k + 1];
    a.panel_scale[cell] = d;
  }
  if (a.layouts & kQ8TokenTiles) {
    const size_t cell = a.tile_cell(t, b);
    std::memcpy(a.tile_q.data() + cell * kQ8Block, qb, kQ8Block);
    a.tile_q8_start[cell] = a.q8_start[k];
    a.tile_q4_start[cell] = a.q4_start[k];
    a.tile_scale[cell] = d;
  }
}

}  // namespace

void quantize_token_blocks(const float* x, int64_t t0, int64_t t1, int64_t p0, int64_t p1, Q8Activations& a) {
  const int64_t blocks = a.in / kQ8Block, pairs = (blocks + 1) / 2;
  if (t0 < 0 || t0 > t1 || t1 > a.T)
    throw Error("quantize_token_blocks: tokens [" + std::to_string(t0) + ", " + std::to_string(t1) +
                ") of activations sized for " + std::to_string(a.T));
  if (p0 < 0 || p0 > p1 || p1 > pairs)
    throw Error("quantize_token_blocks: block pairs [" + std::to_string(p0) + ", " + std::to_string(p1) +
                ") of activations with " + std::to_string(pairs) + " pairs (in = " + std::to_string(a.in) + ")");
#if defined(__x86_64__)
  const bool simd = gemm_q8_available();
#else
  const bool simd = false;
#endif
  if (a.layouts & kQ8RowTiles)
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(a.pair_scale.data() + (t * pairs + p0) * 16, a.pair_scale.data() + (t * pairs + p1) * 16, 0.0f);
      std::fill(a.q4_bias.data() + (t * pairs + p0) * 16, a.q4_bias.data() + (t * pairs + p1) * 16, 0);
    }
  const int64_t b0 = 2 * p0, b1 = std::min(blocks, 2 * p1);
  // The tokens a panel at a time, block by block across them: a panel's cells of one block are
  // written in a row. Token by token, the stores into lines the weight stream had evicted
  // stalled: 11.5% of an 8-stream decode step's samples, 7.5% this way (docs/perf.md).
  for (int64_t q0 = t0, q1; q0 < t1; q0 = q1) {
    q1 = std::min(t1, (q0 / kPanelTokens + 1) * kPanelTokens);
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t t = q0; t < q1; ++t) quantize_cell(x, t, b, simd, a);
  }
}

void quantize_tokens(const float* x, int64_t t0, int64_t t1, Q8Activations& a) {
  quantize_token_blocks(x, t0, t1, 0, (a.in / kQ8Block + 1) / 2, a);
}

void quantize_activations(const float* x, int64_t T, int64_t in, Q8Activations& a, unsigned layouts) {
  size_activations(T, in, layouts, a);
  quantize_tokens(x, 0, T, a);
}

bool quantize_block_matches_scalar(const float* xb) {
  int8_t q_scalar[kQ8Block];
  HalfSums s_scalar;
  const float d_scalar = quantize_block_scalar(xb, q_scalar, &s_scalar);
#if defined(__x86_64__)
  if (!gemm_q8_available()) return true;
  int8_t q_simd[kQ8Block];
  HalfSums s_simd;
  const float d_simd =
      gemm_q8_avx512() ? quantize_block_avx512(xb, q_simd, &s_simd) : quantize_block_avx2(xb, q_simd, &s_simd);
  return d_simd == d_scalar && s_simd.lo == s_scalar.lo && s_simd.hi == s_scalar.hi &&
         std::memcmp(q_simd, q_scalar, sizeof q_simd) == 0;
#else
  (void)d_scalar;
  return true;
#endif
}

}  // namespace g4::ops
