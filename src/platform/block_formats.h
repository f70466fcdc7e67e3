// The byte layout of one block of each ggml block format g4 reads and writes (GGUF; bit-compatible
// with ggml), the K-quants' scale packing, and the scalar decoding of a run of blocks: the spec
// every kernel is tested against. A row of a block type is a sequence of blocks; offsets below are
// bytes from the start of a block; f16 fields are little-endian IEEE half precision.
//
// Encoding (quantize) and the dot products live in ops (src/ops/quant); the layout and decoding
// live here because TensorView (platform) decodes any tensor's rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace g4 {

// Q8_0: f16 d, int8 q[32]; x = q·d.
namespace q8_0 {
inline constexpr int64_t kBlockValues = 32;
inline constexpr size_t kBlockBytes = 34;
inline constexpr size_t kDAt = 0, kQsAt = 2;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q8_0

// Q4_0: f16 d, 16 bytes of nibbles; x = (q − 8)·d. Byte j holds element j in its low nibble and
// element j + 16 in its high nibble.
namespace q4_0 {
inline constexpr int64_t kBlockValues = 32;
inline constexpr size_t kBlockBytes = 18;
inline constexpr size_t kDAt = 0, kQsAt = 2, kQsBytes = 16;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q4_0

// Q4_1: f16 d, f16 m, 16 bytes of nibbles (as Q4_0); x = q·d + m.
namespace q4_1 {
inline constexpr int64_t kBlockValues = 32;
inline constexpr size_t kBlockBytes = 20;
inline constexpr size_t kDAt = 0, kMAt = 2, kQsAt = 4, kQsBytes = 16;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q4_1

// Q4_K: super-blocks of 256 values in 8 sub-blocks of 32. f16 d, f16 dmin, 12 bytes of packed
// 6-bit scales and mins (kquant_scale_min), 128 bytes of nibbles: bytes 32c..32c+31 hold
// sub-block 2c in their low nibbles and 2c + 1 in their high nibbles. x = d·sc_j·q − dmin·m_j.
namespace q4_k {
inline constexpr int64_t kBlockValues = 256;
inline constexpr size_t kBlockBytes = 144;
inline constexpr int kSubBlocks = 8, kSubBlockValues = 32;
inline constexpr size_t kDAt = 0, kDminAt = 2, kScalesAt = 4, kScalesBytes = 12, kQsAt = 16;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q4_k

// Q5_K: as Q4_K, with 32 bytes of fifth bits (qh) before the nibbles: bit 2c of qh[l] is value
// l of sub-block 2c's fifth bit, bit 2c + 1 that of sub-block 2c + 1.
namespace q5_k {
inline constexpr int64_t kBlockValues = 256;
inline constexpr size_t kBlockBytes = 176;
inline constexpr int kSubBlocks = 8, kSubBlockValues = 32;
inline constexpr size_t kDAt = 0, kDminAt = 2, kScalesAt = 4, kScalesBytes = 12, kQhAt = 16, kQhBytes = 32, kQsAt = 48;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q5_k

// Q6_K: super-blocks of 256 values in 16 sub-blocks of 16. 128 bytes of low nibbles (ql), 64
// bytes of high bit pairs (qh), int8 scales[16], f16 d; x = d·sc_j·(q − 32). Two halves of 128
// values, each from 64 ql bytes and 32 qh bytes.
namespace q6_k {
inline constexpr int64_t kBlockValues = 256;
inline constexpr size_t kBlockBytes = 210;
inline constexpr int kSubBlocks = 16, kSubBlockValues = 16;
inline constexpr size_t kQlAt = 0, kQhAt = 128, kScalesAt = 192, kDAt = 208;
void dequantize(const std::byte* src, float* y, int64_t n);
}  // namespace q6_k

// The 6-bit scale and min of sub-block j (0..7) packed in the 12 scale bytes of a Q4_K/Q5_K block.
void kquant_scale_min(int j, const uint8_t* scales12, uint8_t* scale, uint8_t* min);
// All eight at once, for the SIMD kernels: out[j] = scale j, out[8 + j] = min j. The 12 bytes as
// little-endian words a, b, c hold sub-blocks 0-3 in the low 6 bits of a's (scales) and b's
// (mins) bytes, and 4-7 in c's nibbles (scale low, min high) with their top two bits in the top
// bits of a's and b's bytes: four sub-blocks per 32-bit operation.
inline void kquant_scales_mins(const uint8_t* scales12, uint8_t out[16]) {
  uint32_t a, b, c;
  std::memcpy(&a, scales12, 4);
  std::memcpy(&b, scales12 + 4, 4);
  std::memcpy(&c, scales12 + 8, 4);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t words[4] = {a & k6, (c & k4) | (((a >> 6) & k2) << 4), b & k6,
                             ((c >> 4) & k4) | (((b >> 6) & k2) << 4)};
  std::memcpy(out, words, 16);
}

}  // namespace g4
