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
    case DType::Q8_0_R16: return q8_0::kBlockValues;
    case DType::Q4_0:
    case DType::Q4_0_R16: return q4_0::kBlockValues;
    case DType::Q4_1: return q4_1::kBlockValues;
    case DType::BF16_R16: return 2;  // a pair of bf16 values, one 32-bit lane of VDPBF16PS
    case DType::Q4_K:
    case DType::Q4_K_R16: return q4_k::kBlockValues;
    case DType::Q5_K:
    case DType::Q5_K_R16: return q5_k::kBlockValues;
    case DType::Q6_K:
    case DType::Q6_K_R16: return q6_k::kBlockValues;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::Q8_0: return q8_0::kBlockBytes;
    case DType::Q4_0: return q4_0::kBlockBytes;
    case DType::Q4_1: return q4_1::kBlockBytes;
    case DType::Q4_K: return q4_k::kBlockBytes;
    case DType::Q5_K: return q5_k::kBlockBytes;
    case DType::Q6_K: return q6_k::kBlockBytes;
    case DType::Q8_0_R16: return q8_0::kBlockBytes;  // per row: a group of 16 rows holds 16 blocks per block column
    case DType::Q4_0_R16: return q4_0::kBlockBytes;
    case DType::Q4_K_R16: return q4_k::kBlockBytes;
    case DType::Q5_K_R16: return q5_k::kBlockBytes;
    case DType::Q6_K_R16: return q6_k::kBlockBytes;
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

}  // namespace

void dequantize_row(DType t, const std::byte* src, float* y, int64_t n) {
  switch (t) {
    case DType::F32: std::memcpy(y, src, size_t(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(rd16(src + i * 2));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(rd16(src + i * 2));
      return;
    case DType::Q8_0: return q8_0::dequantize(src, y, n);
    case DType::Q4_0: return q4_0::dequantize(src, y, n);
    case DType::Q4_1: return q4_1::dequantize(src, y, n);
    case DType::Q4_K: return q4_k::dequantize(src, y, n);
    case DType::Q5_K: return q5_k::dequantize(src, y, n);
    case DType::Q6_K: return q6_k::dequantize(src, y, n);
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
