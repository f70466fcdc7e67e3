#include "platform/block_formats.h"

#include "platform/dtype.h"

namespace g4 {

// Q4_0 shares Q8_0's block size and field offsets, and Q5_K Q4_K's head and sub-blocks: code that
// reads either through one set of constants (row interleaving, the K-quant loops) relies on it.
static_assert(q4_0::kBlockValues == q8_0::kBlockValues && q4_0::kDAt == q8_0::kDAt && q4_0::kQsAt == q8_0::kQsAt);
static_assert(q5_k::kBlockValues == q4_k::kBlockValues && q5_k::kDAt == q4_k::kDAt && q5_k::kDminAt == q4_k::kDminAt &&
              q5_k::kScalesAt == q4_k::kScalesAt && q5_k::kSubBlockValues == q4_k::kSubBlockValues);

namespace {

inline float half_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}
inline uint8_t u8(const std::byte* p) { return uint8_t(*p); }
inline const uint8_t* bytes(const std::byte* p) { return reinterpret_cast<const uint8_t*>(p); }

}  // namespace

void kquant_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void q8_0::dequantize(const std::byte* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockValues; ++b, src += kBlockBytes, y += kBlockValues) {
    const float d = half_at(src + kDAt);
    for (int j = 0; j < kBlockValues; ++j) y[j] = float(int8_t(u8(src + kQsAt + j))) * d;
  }
}

void q4_0::dequantize(const std::byte* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockValues; ++b, src += kBlockBytes, y += kBlockValues) {
    const float d = half_at(src + kDAt);
    for (size_t j = 0; j < kQsBytes; ++j) {
      const uint8_t q = u8(src + kQsAt + j);
      y[j] = float(int(q & 0xF) - 8) * d;
      y[j + kQsBytes] = float(int(q >> 4) - 8) * d;
    }
  }
}

void q4_1::dequantize(const std::byte* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockValues; ++b, src += kBlockBytes, y += kBlockValues) {
    const float d = half_at(src + kDAt), m = half_at(src + kMAt);
    for (size_t j = 0; j < kQsBytes; ++j) {
      const uint8_t q = u8(src + kQsAt + j);
      y[j] = float(q & 0xF) * d + m;
      y[j + kQsBytes] = float(q >> 4) * d + m;
    }
  }
}

namespace {

// Q4_K and Q5_K differ only in Q5_K's fifth bit per value (qh) and where the nibbles start.
template <bool kFifth>
void dequantize_k_quant(const std::byte* src, float* y, int64_t n) {
  using namespace q4_k;  // Q5_K shares every constant used here but the two below
  constexpr size_t kBytes = kFifth ? q5_k::kBlockBytes : q4_k::kBlockBytes;
  constexpr size_t kNibblesAt = kFifth ? q5_k::kQsAt : q4_k::kQsAt;
  for (int64_t b = 0; b < n / kBlockValues; ++b, src += kBytes) {
    const float d = half_at(src + kDAt), dmin = half_at(src + kDminAt);
    const uint8_t* scales = bytes(src + kScalesAt);
    const uint8_t* qh = bytes(src + q5_k::kQhAt);  // read only for Q5_K
    const uint8_t* ql = bytes(src + kNibblesAt);
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kBlockValues; j += 2 * kSubBlockValues, is += 2, ql += kSubBlockValues) {
      uint8_t sc, m;
      kquant_scale_min(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      kquant_scale_min(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      if constexpr (kFifth) {
        for (int l = 0; l < kSubBlockValues; ++l) *y++ = d1 * float((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < kSubBlockValues; ++l) *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      } else {
        for (int l = 0; l < kSubBlockValues; ++l) *y++ = d1 * float(ql[l] & 0xF) - m1;
        for (int l = 0; l < kSubBlockValues; ++l) *y++ = d2 * float(ql[l] >> 4) - m2;
      }
    }
  }
}

}  // namespace

void q4_k::dequantize(const std::byte* src, float* y, int64_t n) { dequantize_k_quant<false>(src, y, n); }
void q5_k::dequantize(const std::byte* src, float* y, int64_t n) { dequantize_k_quant<true>(src, y, n); }

void q6_k::dequantize(const std::byte* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockValues; ++b, src += kBlockBytes) {
    const uint8_t* ql = bytes(src + kQlAt);
    const uint8_t* qh = bytes(src + kQhAt);
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + kScalesAt);
    const float d = half_at(src + kDAt);
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / kSubBlockValues;
        const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace g4
