// Q6_K (platform/block_formats.h): super-blocks of 256 values, 16 sub-blocks of 16 with int8
// scales; x = d·sc_j·(q − 32), q in 0..63 (low nibble in ql, high bit pair in qh).
#include <algorithm>
#include <cmath>

#include "ops/quant/block_quant.h"

namespace g4::ops::quant {

using namespace q6_k;

float dot_q6_k(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / kBlockValues; ++k, b += kBlockBytes) {
    const uint8_t* ql = bytes(b + kQlAt);
    const uint8_t* qh = bytes(b + kQhAt);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + kScalesAt);
    const float d = half_at(b + kDAt);
    float acc = 0;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, x += 128) {
      float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // one per 16-value sub-block of this half
      for (int l = 0; l < 32; ++l) {
        const int is = l / kSubBlockValues;
        s[is] += float(int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * x[l];
        s[is + 2] += float(int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * x[l + 32];
        s[is + 4] += float(int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * x[l + 64];
        s[is + 6] += float(int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * x[l + 96];
      }
      for (int j = 0; j < 8; ++j) acc += float(sc[j]) * s[j];
    }
    total += d * acc;
  }
  return total;
}

namespace {

void quantize_block(const float* x, std::byte* b) {
  constexpr int kSub = kSubBlockValues;
  float scale[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    float amax = 0;
    for (int l = 0; l < kSub; ++l) amax = std::max(amax, std::fabs(x[kSub * j + l]));
    scale[j] = amax / 31.0f;
  }
  const float d = round_to_f16(*std::max_element(scale, scale + kSubBlocks) / 127.0f);
  int8_t sc[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) sc[j] = int8_t(d ? std::clamp(nearest(scale[j] / d), 0, 127) : 0);
  uint8_t q[kBlockValues];
  for (int j = 0; j < kSubBlocks; ++j) {
    const float dj = d * float(sc[j]);
    const float id = dj ? 1.0f / dj : 0.0f;
    for (int l = 0; l < kSub; ++l) q[kSub * j + l] = uint8_t(std::clamp(nearest(x[kSub * j + l] * id), -32, 31) + 32);
  }
  uint8_t* ql = reinterpret_cast<uint8_t*>(b + kQlAt);
  uint8_t* qh = reinterpret_cast<uint8_t*>(b + kQhAt);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = q[128 * h + l], q2 = q[128 * h + l + 32], q3 = q[128 * h + l + 64], q4 = q[128 * h + l + 96];
      ql[64 * h + l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[64 * h + l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[32 * h + l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  std::memcpy(b + kScalesAt, sc, kSubBlocks);
  put_half(b + kDAt, d);
}

}  // namespace

void quantize_q6_k(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k) quantize_block(x + k * kBlockValues, b + k * kBlockBytes);
}

}  // namespace g4::ops::quant
