// gemm_kquant_rows_neon (gemm_q8_neon.h): row-major Q4_K, Q5_K and Q6_K super-blocks x int8
// activations on SDOT. Each 32-value activation block meets one Q4_K/Q5_K sub-block (or two Q6_K
// sub-blocks of 16), so every product of codes and activations is summed exactly in int32 per
// sub-block; the f32 steps per output then run block by block in order (below), one lane per row.
#include <string>

#include "ops/matmul/gemm_q8_neon.h"
#include "platform/block_formats.h"
#include "platform/error.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "platform/target_attributes.h"

namespace g4::ops {
namespace {

const uint8_t* u8(const std::byte* p) { return reinterpret_cast<const uint8_t*>(p); }

// Lane r = the sum of s[r]'s four lanes (exact int32).
G4_TARGET_NEON_DOTPROD inline int32x4_t lane_sums(const int32x4_t s[4]) {
  return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

// Q4_K / Q5_K, rows row[0..3] x tokens t..t+C-1. Sub-block j of super-block s meets activation
// block b = 8s + j: acc += (d·sc_j·x_scale)·Σ code·q − (dmin·m_j·x_scale)·Σq, with Σq = −q4_start/8.
template <bool kQ5, int C>
G4_TARGET_NEON_DOTPROD void q45k_tile(const std::byte* const row[4], const Q8Activations& a, int64_t t,
                                      float32x4_t acc[C]) {
  constexpr size_t kBytes = kQ5 ? q5_k::kBlockBytes : q4_k::kBlockBytes;
  constexpr size_t kNibblesAt = kQ5 ? q5_k::kQsAt : q4_k::kQsAt;
  const int64_t supers = a.in / q4_k::kBlockValues, blocks = a.in / kQ8Block;
  for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < supers; ++s) {
    alignas(16) float dsc[8][4], dm[8][4];  // [sub-block][row]
    for (int r = 0; r < 4; ++r) {
      const std::byte* blk = row[r] + uint64_t(s) * kBytes;
      uint8_t sm[16];
      kquant_scales_mins(u8(blk + q4_k::kScalesAt), sm);
      const float d = neon_f16_at(blk + q4_k::kDAt), dmin = neon_f16_at(blk + q4_k::kDminAt);
      for (int j = 0; j < 8; ++j) {
        dsc[j][r] = d * float(sm[j]);
        dm[j][r] = dmin * float(sm[8 + j]);
      }
    }
    for (int j = 0; j < 8; ++j) {
      // Codes of sub-block j, values 0-15 and 16-31, per row: nibbles (low for even j, high for
      // odd) of bytes 32(j/2)..+31, plus 16 where Q5_K's bit j of qh[l] is set.
      int8x16_t lo[4], hi[4];
      for (int r = 0; r < 4; ++r) {
        const std::byte* blk = row[r] + uint64_t(s) * kBytes;
        const uint8_t* qs = u8(blk + kNibblesAt) + 32 * (j / 2);
        uint8x16_t v0 = vld1q_u8(qs), v1 = vld1q_u8(qs + 16);
        v0 = j % 2 ? vshrq_n_u8(v0, 4) : vandq_u8(v0, vdupq_n_u8(0x0F));
        v1 = j % 2 ? vshrq_n_u8(v1, 4) : vandq_u8(v1, vdupq_n_u8(0x0F));
        if constexpr (kQ5) {
          const uint8_t* qh = u8(blk + q5_k::kQhAt);
          const uint8x16_t bit = vdupq_n_u8(uint8_t(1u << j)), sixteen = vdupq_n_u8(16);
          v0 = vorrq_u8(v0, vandq_u8(vtstq_u8(vld1q_u8(qh), bit), sixteen));
          v1 = vorrq_u8(v1, vandq_u8(vtstq_u8(vld1q_u8(qh + 16), bit), sixteen));
        }
        lo[r] = vreinterpretq_s8_u8(v0);
        hi[r] = vreinterpretq_s8_u8(v1);
      }
      const float32x4_t dscv = vld1q_f32(dsc[j]), dmv = vld1q_f32(dm[j]);
      const int64_t b = 8 * s + j;
      for (int c = 0; c < C; ++c) {
        const size_t k = size_t((t + c) * blocks + b);
        const int8_t* x = a.q.data() + (t + c) * a.in + b * kQ8Block;
        const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
        int32x4_t sums[4];
        for (int r = 0; r < 4; ++r) sums[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo[r], x0), hi[r], x1);
        const float xs = a.scale[k], xsum = float(-a.q4_start[k] / 8);
        acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(lane_sums(sums)), vmulq_n_f32(dscv, xs));
        acc[c] = vfmsq_f32(acc[c], dmv, vdupq_n_f32(xs * xsum));
      }
    }
  }
}

// Q6_K, rows row[0..3] x tokens t..t+C-1. Half h, group g of super-block s (values 128h + 32g ..
// +31) meets activation block b = 8s + 4h + g; its two sub-blocks of 16 have scales sc[8h + 2g],
// sc[8h + 2g + 1]: acc += (d·sc·x_scale)·(Σ code·q − 32·Σq) per sub-block (q6_start = −32·Σq).
template <int C>
G4_TARGET_NEON_DOTPROD void q6k_tile(const std::byte* const row[4], const Q8Activations& a, int64_t t,
                                     float32x4_t acc[C]) {
  const int64_t supers = a.in / q6_k::kBlockValues, blocks = a.in / kQ8Block;
  for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < supers; ++s) {
    alignas(16) float dsc[16][4];  // [sub-block][row]
    for (int r = 0; r < 4; ++r) {
      const std::byte* blk = row[r] + uint64_t(s) * q6_k::kBlockBytes;
      const float d = neon_f16_at(blk + q6_k::kDAt);
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + q6_k::kScalesAt);
      for (int k = 0; k < 16; ++k) dsc[k][r] = d * float(sc[k]);
    }
    for (int h = 0; h < 2; ++h)
      for (int g = 0; g < 4; ++g) {
        // Codes 0..63: a nibble of ql (low for g < 2, high otherwise; bytes 32(g%2)..+31 of the
        // half's 64) and bit pair g of the half's 32 qh bytes as bits 4-5.
        int8x16_t lo[4], hi[4];
        for (int r = 0; r < 4; ++r) {
          const std::byte* blk = row[r] + uint64_t(s) * q6_k::kBlockBytes;
          const uint8_t* ql = u8(blk + q6_k::kQlAt) + 64 * h + 32 * (g % 2);
          const uint8_t* qh = u8(blk + q6_k::kQhAt) + 32 * h;
          uint8x16_t v[2];
          for (int i = 0; i < 2; ++i) {
            const uint8x16_t l = vld1q_u8(ql + 16 * i), p = vld1q_u8(qh + 16 * i);
            const uint8x16_t nib = g < 2 ? vandq_u8(l, vdupq_n_u8(0x0F)) : vshrq_n_u8(l, 4);
            const uint8x16_t top = vandq_u8(vshlq_u8(p, vdupq_n_s8(int8_t(-2 * g))), vdupq_n_u8(3));
            v[i] = vorrq_u8(nib, vshlq_n_u8(top, 4));
          }
          lo[r] = vreinterpretq_s8_u8(v[0]);
          hi[r] = vreinterpretq_s8_u8(v[1]);
        }
        const float32x4_t d0 = vld1q_f32(dsc[8 * h + 2 * g]), d1 = vld1q_f32(dsc[8 * h + 2 * g + 1]);
        const int64_t b = 8 * s + 4 * h + g;
        for (int c = 0; c < C; ++c) {
          const size_t k = size_t((t + c) * blocks + b);
          const int8_t* x = a.q.data() + (t + c) * a.in + b * kQ8Block;
          const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
          int32x4_t s0[4], s1[4];
          for (int r = 0; r < 4; ++r) {
            s0[r] = vdotq_s32(vdupq_n_s32(0), lo[r], x0);
            s1[r] = vdotq_s32(vdupq_n_s32(0), hi[r], x1);
          }
          const int32x4_t i0 = vaddq_s32(lane_sums(s0), vdupq_n_s32(a.q6_start[2 * k]));
          const int32x4_t i1 = vaddq_s32(lane_sums(s1), vdupq_n_s32(a.q6_start[2 * k + 1]));
          const float xs = a.scale[k];
          acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(i0), vmulq_n_f32(d0, xs));
          acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(i1), vmulq_n_f32(d1, xs));
        }
      }
  }
}

template <int C>
G4_TARGET_NEON_DOTPROD void tile_into(DType dtype, const std::byte* w, uint64_t rb, int rows, const Q8Activations& a,
                                      int64_t t, float* y, int64_t ldy) {
  const std::byte* row[4];
  for (int r = 0; r < 4; ++r) row[r] = w + uint64_t(r < rows ? r : 0) * rb;  // a missing row repeats row 0
  float32x4_t acc[C];
  if (dtype == DType::Q4_K) q45k_tile<false, C>(row, a, t, acc);
  else if (dtype == DType::Q5_K) q45k_tile<true, C>(row, a, t, acc);
  else q6k_tile<C>(row, a, t, acc);
  for (int c = 0; c < C; ++c) {
    alignas(16) float out[4];
    vst1q_f32(out, acc[c]);
    for (int r = 0; r < rows; ++r) y[c * ldy + r] = out[r];
  }
}

}  // namespace

void gemm_kquant_rows_neon(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                           float* y, int64_t ldy) {
  if (dtype != DType::Q4_K && dtype != DType::Q5_K && dtype != DType::Q6_K)
    throw Error("gemm_kquant_rows_neon: " + std::string(dtype_name(dtype)) + " weights are not Q4_K, Q5_K or Q6_K");
  if (a.in % q4_k::kBlockValues)
    throw Error("gemm_kquant_rows_neon: " + std::to_string(a.in) + " inputs are not whole super-blocks of 256");
  const uint64_t rb = row_bytes(dtype, a.in);
  for_each_row_tile(a.T, o_begin, o_end, [&](int64_t o, int r, int64_t t, int c) {
    const std::byte* wo = w + uint64_t(o) * rb;
    float* yo = y + t * ldy + o;
    switch (c) {
      case 1: tile_into<1>(dtype, wo, rb, r, a, t, yo, ldy); break;
      case 2: tile_into<2>(dtype, wo, rb, r, a, t, yo, ldy); break;
      case 3: tile_into<3>(dtype, wo, rb, r, a, t, yo, ldy); break;
      default: tile_into<4>(dtype, wo, rb, r, a, t, yo, ldy); break;
    }
  });
}

}  // namespace g4::ops

#else

namespace g4::ops {

void gemm_kquant_rows_neon(const Q8Activations&, const std::byte*, DType dtype, int64_t, int64_t, float*, int64_t) {
  throw Error("gemm_kquant_rows_neon: " + std::string(dtype_name(dtype)) + " weights: not an aarch64 build");
}

}  // namespace g4::ops

#endif
