// gemm_q8_rows_neon (gemm_q8_neon.h): row-major Q8_0 / Q4_0 tiles on SDOT.
#include "ops/matmul/gemm_q8_neon.h"

#include <string>

#include "platform/block_formats.h"
#include "platform/error.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "platform/target_attributes.h"

// Only the functions marked G4_TARGET_NEON_DOTPROD are compiled for dotprod: they run only where
// the probe and the SDOT self-test confirmed it (int8_kernel_tier() == Int8Dot::NeonDot).

namespace g4::ops {
namespace {

// One block of a row as 32 signed values (low: values 0-15, high: 16-31) and its scale.
template <bool kQ4>
G4_TARGET_NEON_DOTPROD inline void load_block(const std::byte* blk, int8x16_t& lo, int8x16_t& hi, float& d) {
  if constexpr (kQ4) {
    d = neon_f16_at(blk + q4_0::kDAt);
    // Byte j: value j in the low nibble, value j + 16 in the high one; codes 0..15 stand for -8..7.
    const uint8x16_t packed = vld1q_u8(reinterpret_cast<const uint8_t*>(blk + q4_0::kQsAt));
    const int8x16_t eight = vdupq_n_s8(8);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight);
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight);
  } else {
    d = neon_f16_at(blk + q8_0::kDAt);
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(blk + q8_0::kQsAt));
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(blk + q8_0::kQsAt + 16));
  }
}

// Rows row[0..3] (a missing row repeats row[0]) x tokens t..t+C-1; lane r of sums[c] is row r's
// output for token t + c.
template <bool kQ4, int C>
G4_TARGET_NEON_DOTPROD void tile(const std::byte* const row[4], const Q8Activations& a, int64_t t, float32x4_t sums[C]) {
  constexpr size_t kBlockBytes = kQ4 ? q4_0::kBlockBytes : q8_0::kBlockBytes;
  const int64_t blocks = a.in / kQ8Block;
  float32x4_t acc[C];
  for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    int8x16_t lo[4], hi[4];
    alignas(16) float d[4];
    for (int r = 0; r < 4; ++r) load_block<kQ4>(row[r] + uint64_t(b) * kBlockBytes, lo[r], hi[r], d[r]);
    const float32x4_t dw = vld1q_f32(d);
    for (int c = 0; c < C; ++c) {
      const int8_t* x = a.q.data() + (t + c) * a.in + b * kQ8Block;
      const int8x16_t xl = vld1q_s8(x), xh = vld1q_s8(x + 16);
      int32x4_t s[4];
      for (int r = 0; r < 4; ++r) s[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo[r], xl), hi[r], xh);
      // Lane r = the sum of s[r]'s four lanes: exact int32 block sums, one per row.
      const int32x4_t block = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
      const float32x4_t scale = vmulq_n_f32(dw, a.scale[size_t((t + c) * blocks + b)]);
      acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(block), scale);
    }
  }
  for (int c = 0; c < C; ++c) sums[c] = acc[c];
}

template <bool kQ4, int C>
G4_TARGET_NEON_DOTPROD void tile_into(const std::byte* w, uint64_t rb, int rows, const Q8Activations& a, int64_t t, float* y,
                          int64_t ldy) {
  const std::byte* row[4];
  for (int r = 0; r < 4; ++r) row[r] = w + uint64_t(r < rows ? r : 0) * rb;
  float32x4_t sums[C];
  tile<kQ4, C>(row, a, t, sums);
  for (int c = 0; c < C; ++c) {
    alignas(16) float out[4];
    vst1q_f32(out, sums[c]);
    for (int r = 0; r < rows; ++r) y[c * ldy + r] = out[r];
  }
}

template <bool kQ4>
void rows(const Q8Activations& a, const std::byte* w, int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  const uint64_t rb = row_bytes(kQ4 ? DType::Q4_0 : DType::Q8_0, a.in);
  for_each_row_tile(a.T, o_begin, o_end, [&](int64_t o, int r, int64_t t, int c) {
    const std::byte* wo = w + uint64_t(o) * rb;
    float* yo = y + t * ldy + o;
    switch (c) {
      case 1: tile_into<kQ4, 1>(wo, rb, r, a, t, yo, ldy); break;
      case 2: tile_into<kQ4, 2>(wo, rb, r, a, t, yo, ldy); break;
      case 3: tile_into<kQ4, 3>(wo, rb, r, a, t, yo, ldy); break;
      default: tile_into<kQ4, 4>(wo, rb, r, a, t, yo, ldy); break;
    }
  });
}

}  // namespace

void gemm_q8_rows_neon(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end,
                       float* y, int64_t ldy) {
  if (dtype == DType::Q8_0) return rows<false>(a, w, o_begin, o_end, y, ldy);
  if (dtype == DType::Q4_0) return rows<true>(a, w, o_begin, o_end, y, ldy);
  if (dtype_is_kquant(dtype)) return gemm_kquant_rows_neon(a, w, dtype, o_begin, o_end, y, ldy);
  throw Error("gemm_q8_rows_neon: the NEON int8 kernels read Q8_0, Q4_0 and K-quant blocks, not " +
              std::string(dtype_name(dtype)));
}

}  // namespace g4::ops

#else

namespace g4::ops {

void gemm_q8_rows_neon(const Q8Activations&, const std::byte*, DType dtype, int64_t, int64_t, float*, int64_t) {
  throw Error("gemm_q8_rows_neon: " + std::string(dtype_name(dtype)) + " weights: not an aarch64 build");
}

}  // namespace g4::ops

#endif
