#include "ops/matmul/gemm_kquant.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "platform/error.h"

#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#if defined(__x86_64__)
#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Sum of 8 lanes in a fixed order.
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline float lane_sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane i of the result: lane idx[i] of v (VPERMPS), for idx = base + i / per (per 4 or 8).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512i spread_index(int base, int per) {
  alignas(64) int32_t idx[16];
  for (int i = 0; i < 16; ++i) idx[i] = base + i / per;
  return _mm512_load_si512(idx);
}

// Q4_K / Q5_K scales of one super-block: dsc lanes 0-7 = d·sc_j, dmn = dmin·m_j (j = 0..7).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline void q45k_scales(const std::byte* blk, __m512& dsc, __m256& dmn) {
  alignas(16) uint8_t sm[16];
  kquant_scales_mins(reinterpret_cast<const uint8_t*>(blk + q4_k::kScalesAt), sm);
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
  dsc = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), _mm512_set1_ps(half_at(blk + q4_k::kDAt)));
  dmn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))),
                      _mm256_set1_ps(half_at(blk + q4_k::kDminAt)));
}

// Q4_K / Q5_K, chunk k (64 values) of a super-block as unsigned codes in value order: the 32
// low nibbles (sub-block 2k) then the 32 high nibbles (sub-block 2k + 1), plus 16 from the
// fifth bits for Q5_K.
template <bool kQ5>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512i q45k_codes(const std::byte* blk, int k) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i b =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (kQ5 ? q5_k::kQsAt : q4_k::kQsAt) + 32 * k));
  __m256i lo = _mm256_and_si256(b, nib), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
  if constexpr (kQ5) {
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + q5_k::kQhAt));
    // Shifting 16-bit lanes by up to 7 leaves each byte's own bit s in its bit 0.
    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k)), one), 4));
    hi = _mm256_or_si256(hi,
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k + 1)), one), 4));
  }
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// R rows x C tokens of Q4_K / Q5_K. Per (row, token), per chunk: one VPDPBUSD of 64 codes x the
// two activation blocks it covers, the lanes scaled by d·sc x the blocks' scales, one FMA; per
// super-block one 8-lane FMA of dmin·m_j x the blocks' sums (scale x Σq). Result: the 16 lanes
// summed minus the 8.
template <int R, int C, bool kQ5>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void tile_q45k(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t,
                                                     float* y, int64_t ldy) {
  constexpr uint64_t kBytes = kQ5 ? q5_k::kBlockBytes : q4_k::kBlockBytes;
  const int64_t in = a.in, blocks = in / kQ8Block, pairs = a.pairs();
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m512 acc[R][C];
  __m256 mins[R][C];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps(), mins[r][c] = _mm256_setzero_ps();
  const __m512i idx[4] = {spread_index(0, 8), spread_index(2, 8), spread_index(4, 8), spread_index(6, 8)};
  for (int64_t sb = 0; sb < in / q4_k::kBlockValues; ++sb) {
    __m256 sums[C];  // per token, the super-block's 8 activation blocks' sums: scale · Σq, Σq = −q4_start / 8
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const int64_t k0 = (t + c) * blocks + sb * 8;
      const __m256 q = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q4_start.data() + k0)));
      sums[c] = _mm256_mul_ps(_mm256_mul_ps(q, _mm256_set1_ps(-0.125f)), _mm256_loadu_ps(a.scale.data() + k0));
    }
    __m512 dsc[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + r * rb + sb * kBytes;
      for (uint64_t o = 0; o < kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + prefetch + o), _MM_HINT_T0);
      __m256 dmn;
      q45k_scales(blk, dsc[r], dmn);
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) mins[r][c] = _mm256_fmadd_ps(dmn, sums[c], mins[r][c]);
    }
    for (int k = 0; k < 4; ++k) {
      const int64_t p = sb * 4 + k;  // the activation pair (blocks 2p, 2p + 1) under chunk k
      __m512i xv[C];
      __m512 xs[C];
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        xv[c] = _mm512_loadu_si512(a.q.data() + (t + c) * in + p * 64);
        xs[c] = _mm512_loadu_ps(a.pair_scale.data() + ((t + c) * pairs + p) * 16);
      }
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i wv = q45k_codes<kQ5>(w + r * rb + sb * kBytes, k);
        const __m512 ws = _mm512_permutexvar_ps(idx[k], dsc[r]);
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv[c]);
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, xs[c]), acc[r][c]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[c * ldy + r] = x86::lane_sum(acc[r][c]) - lane_sum8(mins[r][c]);
}

// Q6_K, half h, pair j (values 64j..64j + 63 of the half) as unsigned codes 0..63 (stored +32):
// ql bytes [64h, 64h + 64) hold low nibbles of values l and 32 + l (j = 0) or their high nibbles
// (j = 1); qh byte l holds the top two bits of values l, 32 + l, 64 + l, 96 + l (bits 0-1 .. 6-7).
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA inline __m512i q6k_codes(const std::byte* blk, int h, int j) {
  const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + q6_k::kQhAt + 32 * h));
  const __m512i low = j == 0 ? _mm512_and_si512(ql, _mm512_set1_epi8(0x0F))
                             : _mm512_and_si512(_mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0F));
  // Shifting 16-bit lanes by up to 6 leaves each byte's own bits s, s + 1 in its bits 0-1.
  const __m256i h0 = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(4 * j)), h1 = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(4 * j + 2));
  const __m512i hb = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1), _mm512_set1_epi8(3));
  return _mm512_or_si512(low, _mm512_slli_epi16(hb, 4));
}

// R rows x C tokens of Q6_K. Per (row, token), per pair of activation blocks: one VPDPBUSD of 64
// codes, minus 32 x each lane's Σq (one VPDPBUSD per token, shared by the rows), the lanes
// scaled by d·scale of their 16-value sub-block x the blocks' scales, one FMA.
template <int R, int C>
G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA void tile_q6k(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t,
                                                    float* y, int64_t ldy) {
  const int64_t in = a.in, pairs = a.pairs();
  const uint64_t prefetch = row_tile_prefetch_distance(rb, R);
  __m512 acc[R][C];
  x86::zero_tile<R, C>(acc);
  const __m512i idx[4] = {spread_index(0, 4), spread_index(4, 4), spread_index(8, 4), spread_index(12, 4)};
  const __m512i bias = _mm512_set1_epi8(32);
  for (int64_t sb = 0; sb < in / q6_k::kBlockValues; ++sb) {
    __m512 dsc[R];  // d · scale of the 16 sub-blocks
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + r * rb + sb * q6_k::kBlockBytes;
      for (uint64_t o = 0; o < q6_k::kBlockBytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk + prefetch + o), _MM_HINT_T0);
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q6_k::kScalesAt));
      dsc[r] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(half_at(blk + q6_k::kDAt)));
    }
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j) {
        const int64_t p = sb * 4 + 2 * h + j;  // blocks 8sb + 4h + 2j, + 1
        __m512i xv[C], off[C];
        __m512 xs[C];
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          xv[c] = _mm512_loadu_si512(a.q.data() + (t + c) * in + p * 64);
          off[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, xv[c]);
          xs[c] = _mm512_loadu_ps(a.pair_scale.data() + ((t + c) * pairs + p) * 16);
        }
        #pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i wv = q6k_codes(w + r * rb + sb * q6_k::kBlockBytes, h, j);
          const __m512 ws = _mm512_permutexvar_ps(idx[2 * h + j], dsc[r]);
          #pragma GCC unroll 4
          for (int c = 0; c < C; ++c) {
            const __m512i s = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv[c]), off[c]);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, xs[c]), acc[r][c]);
          }
        }
      }
  }
  x86::store_tile_sums<R, C>(acc, y, ldy);
}

using TileFn = RowTileFn;

template <int R, int C>
TileFn tile_of(DType dtype) {
  return dtype == DType::Q4_K ? tile_q45k<R, C, false> : dtype == DType::Q5_K ? tile_q45k<R, C, true> : tile_q6k<R, C>;
}

template <int R>
TileFn tile_of(DType dtype, int c) {
  return c == 1 ? tile_of<R, 1>(dtype) : c == 2 ? tile_of<R, 2>(dtype) : c == 3 ? tile_of<R, 3>(dtype) : tile_of<R, 4>(dtype);
}

TileFn pick(DType dtype, int r, int c) {
  switch (r) {
    case 1: return tile_of<1>(dtype, c);
    case 2: return tile_of<2>(dtype, c);
    case 3: return tile_of<3>(dtype, c);
    default: return tile_of<4>(dtype, c);
  }
}

}  // namespace

void gemm_kquant_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy) {
  if (!dtype_is_kquant(dtype))
    throw Error("gemm_kquant_rows: " + std::string(dtype_name(dtype)) + " weights are not K-quant super-blocks");
  if (a.in % q4_k::kBlockValues)
    throw Error("gemm_kquant_rows: rows of " + std::to_string(a.in) + " values are not whole super-blocks of 256");
  if (!(a.layouts & kQ8RowTiles))
    throw Error("gemm_kquant_rows: " + std::string(dtype_name(dtype)) +
                " weights read the activations' row-tile scales, which quantize_activations was not asked for");
  const uint64_t rb = row_bytes(dtype, a.in);
  for_each_row_tile(a.T, o_begin, o_end, [&](int64_t o, int r, int64_t t, int c) {
    pick(dtype, r, c)(w + uint64_t(o) * rb, rb, a, t, y + t * ldy + o, ldy);
  });
}

#else  // not x86-64: gemm_q8_available() is false, so callers never get here

void gemm_kquant_rows(const Q8Activations&, const std::byte*, DType, int64_t, int64_t, float*, int64_t) {
  throw Error("gemm_kquant_rows: the int8 K-quant kernels are built for x86-64 only");
}

#endif

}  // namespace g4::ops
