// Element types of tensors in checkpoints and caches, and scalar conversions.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace g4 {

enum class DType : uint8_t { F32, F16, BF16 };

// Bytes per element.
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "F32", "F16", "BF16" (safetensors spelling)
std::optional<DType> dtype_from_name(std::string_view name);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, overflow to inf

// Round-trip through bf16 (what "the weight dtype" does to a scalar in the reference).
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
inline float round_to_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

}  // namespace g4
