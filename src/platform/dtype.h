// Element types of tensors in checkpoints and caches, and scalar conversions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "platform/block_formats.h"

namespace g4 {

// F32/F16/BF16 are per-element types. The rest are ggml block-quantized types (GGUF): a row is
// a sequence of fixed-size blocks, each holding `dtype_block_size` values in `dtype_block_bytes`
// bytes (Q8_0, Q4_0, Q4_1: 32 values; the K-quants Q4_K, Q5_K, Q6_K: 256; layouts in
// platform/block_formats.h, bit-compatible with ggml).
// Q8_0_R16 / Q4_0_R16 / Q4_K_R16 / Q5_K_R16 / Q6_K_R16 are g4's own: Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K blocks of 16
// consecutive rows interleaved for the VNNI kernel, and BF16_R16 bf16 value pairs of 16 rows interleaved for the
// VDPBF16PS kernel (layouts in row_interleave.h). Same bytes per row on average, but a row is not contiguous: read one
// with TensorView::row_to_f32 (BF16_R16 is therefore a block type of 2-value blocks, with no per-element size). Never
// read from or written to a file.
enum class DType : uint8_t {
  F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q8_0_R16, Q4_0_R16, Q4_K_R16, Q6_K_R16, Q5_K_R16, BF16_R16
};

// Bytes per element of a per-element type (F32/F16/BF16). 0 for block types, which have no
// per-element size: use row_bytes / tensor_bytes for those.
size_t dtype_size(DType t);
bool dtype_is_quantized(DType t);       // a block type
bool dtype_is_kquant(DType t);          // Q4_K, Q5_K or Q6_K: super-blocks of 256 values
int64_t dtype_block_size(DType t);      // values per block (1 for per-element types)
size_t dtype_block_bytes(DType t);      // bytes per block (dtype_size for per-element types)
// Bytes of `cols` values stored contiguously; cols must be a multiple of the block size
// (returns 0 otherwise, which callers treat as "not representable").
uint64_t row_bytes(DType t, int64_t cols);
std::string_view dtype_name(DType t);  // "F32", "F16", "BF16" (safetensors spelling), "Q8_0", "Q4_K", ...
// Safetensors spellings only (F32, F16, BF16): the names a safetensors header may carry.
std::optional<DType> dtype_from_name(std::string_view name);
// Any g4 dtype, case-insensitive ("q4_k", "BF16"): the names the CLI accepts.
std::optional<DType> dtype_from_any_name(std::string_view name);

// ggml's type ids (GGUF tensor info `type`): F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 8, Q4_K 12,
// Q5_K 13, Q6_K 14, BF16 30. nullopt for ids g4 does not read.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
uint32_t dtype_to_ggml(DType t);  // throws g4::Error for the in-memory interleaved types

// Dequantizes n values (a whole number of blocks) of type t starting at src.
// Per-element types are widened. Scalar and exact: the spec every kernel is tested against
// (each block format's own decoder, block_formats.h).
// Interleaved types have no contiguous row: throws g4::Error (use TensorView::row_to_f32).
void dequantize_row(DType t, const std::byte* src, float* dst, int64_t n);
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
