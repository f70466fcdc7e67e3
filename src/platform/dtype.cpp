#include "platform/dtype.h"

#include <cctype>
#include <cmath>
#include <string>

#include "platform/error.h"

namespace g4 {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    default: return 0;
  }
}

bool dtype_is_quantized(DType t) { return dtype_size(t) == 0; }
bool dtype_is_kquant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

int64_t dtype_block_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q8_0_R16:
    case DType::Q4_0_R16: return 32;
    case DType::BF16_R16: return 2;  // a pair of bf16 values, one 32-bit lane of VDPBF16PS
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return 256;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::Q8_0_R16: return 34;  // per row: a group of 16 rows holds 16 blocks per block column
    case DType::Q4_0_R16: return 18;
    case DType::Q4_K_R16: return 144;
    case DType::Q5_K_R16: return 176;
    case DType::Q6_K_R16: return 210;
    case DType::BF16_R16: return 4;
  }
  return 0;
}

uint64_t row_bytes(DType t, int64_t cols) {
  const int64_t bs = dtype_block_size(t);
  if (cols < 0 || cols % bs) return 0;
  return uint64_t(cols / bs) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q8_0_R16: return "Q8_0_R16";
    case DType::Q4_0_R16: return "Q4_0_R16";
    case DType::Q4_K_R16: return "Q4_K_R16";
    case DType::Q5_K_R16: return "Q5_K_R16";
    case DType::Q6_K_R16: return "Q6_K_R16";
    case DType::BF16_R16: return "BF16_R16";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  return std::nullopt;
}

std::optional<DType> dtype_from_any_name(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K})
    if (dtype_name(t) == up) return t;
  return std::nullopt;
}

std::optional<DType> dtype_from_ggml(uint32_t g) {
  switch (g) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 8: return DType::Q8_0;
    case 12: return DType::Q4_K;
    case 13: return DType::Q5_K;
    case 14: return DType::Q6_K;
    case 30: return DType::BF16;
    default: return std::nullopt;
  }
}

uint32_t dtype_to_ggml(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 8;
    case DType::Q4_K: return 12;
    case DType::Q5_K: return 13;
    case DType::Q6_K: return 14;
    case DType::BF16: return 30;
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::BF16_R16: break;
  }
  throw Error("dtype " + std::string(dtype_name(t)) + " is g4's in-memory row-interleaved layout: it has no GGUF type");
}

namespace {

inline uint16_t rd16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline float half_at(const std::byte* p) { return f16_to_f32(rd16(p)); }
inline uint8_t u8(const std::byte* p) { return uint8_t(*p); }

}  // namespace

// The packed 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
void kquant_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequantize_row(DType t, const std::byte* src, float* y, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(y, src, size_t(n) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(rd16(src + i * 2));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(rd16(src + i * 2));
      return;
    case DType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b, src += 34, y += 32) {
        const float d = half_at(src);
        for (int j = 0; j < 32; ++j) y[j] = float(int8_t(u8(src + 2 + j))) * d;
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b, src += 18, y += 32) {
        const float d = half_at(src);
        for (int j = 0; j < 16; ++j) {
          const uint8_t q = u8(src + 2 + j);
          y[j] = float(int(q & 0xF) - 8) * d;
          y[j + 16] = float(int(q >> 4) - 8) * d;
        }
      }
      return;
    case DType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b, src += 20, y += 32) {
        const float d = half_at(src), m = half_at(src + 2);
        for (int j = 0; j < 16; ++j) {
          const uint8_t q = u8(src + 4 + j);
          y[j] = float(q & 0xF) * d + m;
          y[j + 16] = float(q >> 4) * d + m;
        }
      }
      return;
    case DType::Q4_K:
      for (int64_t b = 0; b < n / 256; ++b, src += 144) {
        const float d = half_at(src), dmin = half_at(src + 2);
        const uint8_t* scales = reinterpret_cast<const uint8_t*>(src + 4);
        const uint8_t* q = reinterpret_cast<const uint8_t*>(src + 16);
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
          uint8_t sc, m;
          kquant_scale_min(is, scales, &sc, &m);
          const float d1 = d * sc, m1 = dmin * m;
          kquant_scale_min(is + 1, scales, &sc, &m);
          const float d2 = d * sc, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
          for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
        }
      }
      return;
    case DType::Q5_K:
      for (int64_t b = 0; b < n / 256; ++b, src += 176) {
        const float d = half_at(src), dmin = half_at(src + 2);
        const uint8_t* scales = reinterpret_cast<const uint8_t*>(src + 4);
        const uint8_t* qh = reinterpret_cast<const uint8_t*>(src + 16);
        const uint8_t* ql = reinterpret_cast<const uint8_t*>(src + 48);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
          uint8_t sc, m;
          kquant_scale_min(is, scales, &sc, &m);
          const float d1 = d * sc, m1 = dmin * m;
          kquant_scale_min(is + 1, scales, &sc, &m);
          const float d2 = d * sc, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
          for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
          u1 = uint8_t(u1 << 2);
          u2 = uint8_t(u2 << 2);
        }
      }
      return;
    case DType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b, src += 210) {
        const uint8_t* ql = reinterpret_cast<const uint8_t*>(src);
        const uint8_t* qh = reinterpret_cast<const uint8_t*>(src + 128);
        const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
        const float d = half_at(src + 208);
        for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
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
      return;
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::BF16_R16:
      throw Error("dequantize_row: " + std::string(dtype_name(t)) +
                  " rows are interleaved 16 at a time and not contiguous (read them with TensorView::row_to_f32)");
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | (uint32_t(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                        // below smallest normal f16 (2^-14)
    // value * 2^24 rounded to nearest even gives the subnormal mantissa.
    float scaled = std::fabs(f) * 16777216.0f;  // exact: power-of-two scale
    float r = std::nearbyint(scaled);
    return sign | uint16_t(r);
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return sign | uint16_t(half);
}

}  // namespace g4
