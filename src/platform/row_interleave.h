// Row-interleaved Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K layouts (DType::Q8_0_R16, Q4_0_R16, Q4_K_R16,
// Q5_K_R16, Q6_K_R16) for the VNNI int8 kernels, and BF16_R16 for the VDPBF16PS kernel.
//
// Why: on the checkpoint's row-major blocks the kernel spends ~16 instructions per 34-byte block
// (sign tricks, scale broadcasts, a horizontal sum per row), enough to make decode compute-bound
// on two cores. Interleaving 16 rows puts 4 values of each of 16 rows in one 64-byte vector, so
// one VPDPBUSD (with the 4 activation bytes broadcast from memory) advances 16 rows at once and
// each output row owns one f32 lane: no horizontal sums, one scale conversion per 16 blocks.
//
// A matrix of `rows` (a multiple of 16) x `in` values is a sequence of row groups; group g holds
// rows 16g..16g+15 as in/32 block columns, each of 16 x (block bytes) in two parts:
//   scales: [16 x f16 scale d, row 0 first]                                              32 B
//   values: Q8_0_R16: 8 vectors of 64 B; vector j, byte 4r+k = q[row r][4j+k] XOR 0x80   512 B
//                     (offset binary, q + 128 in 0..255: VPDPBUSD's unsigned operand)
//           Q4_0_R16: 4 vectors of 64 B; vector j, byte 4r+k = packed byte 4j+k of row r's
//                     block (low nibble: value 4j+k, high nibble: value 16+4j+k, codes 0..15) 256 B
// Columns are stored in pairs, [scales 2p | scales 2p+1 | values 2p | values 2p+1], and an odd
// last column alone as [scales | values]. Why: a Q4 column is 288 B (4.5 cache lines), so stored
// one after another every second column's four value vectors each straddled two lines; in pairs
// (576 B, 9 lines; Q8: 1088 B, 17 lines) a group starting on a line has every value vector on
// one line and both scale sets in one line.
// Q4_K_R16: a group holds in/256 super-block columns of 2304 B (16 x 144), each
//   [  0,   32) 16 x f16 d (row 0 first)      [32, 64) 16 x f16 dmin
//   [ 64,  192) sub-block j at 64 + 16j, byte r: (scale_j & 15) | (min_j & 15) << 4 of row r
//   [192,  256) sub-blocks 2p, 2p+1 at 192 + 16p, byte r: hi(2p) | hi(2p+1) << 4, where
//               hi(j) = scale_j >> 4 | (min_j >> 4) << 2 (the 6-bit scales' and mins' top bits)
//   [256, 2304) chunk k (values 64k..64k+63: sub-blocks 2k in the low nibbles, 2k+1 in the high)
//               at 256 + 512k: vector v at + 64v, byte 4r+i = packed byte 32k + 4v + i of row r
//   so that one super-block column is one sequential read and every vector sits on one line.
// Q5_K_R16: as Q4_K_R16 with super-block columns of 2816 B (16 x 176): the same 2304 B, then
//   [2304, 2816) the fifth bits: vector v at 2304 + 64v, byte 4r+k = qh[4v + k] of row r (bit j
//               of qh[i] is value 32j + i's fifth bit, so chunk k takes bits 2k and 2k + 1)
// Q6_K_R16: a group holds in/256 super-block columns of 3360 B (16 x 210), each of three parts:
//   d:      16 x f16 (row 0 first)                                                          32 B
//   scales: sub-block i (16 values) at + 16i, byte r: row r's int8 scale i                 256 B
//   values: half h (values 128h..128h+127) at + 1536h; in it, for v = 0..7, three vectors at
//           + 192v: byte 4r+k of the first = ql[64h + 4v + k] of row r, of the second
//           ql[64h + 32 + 4v + k], of the third qh[32h + 4v + k] (Q6_K's own bytes, so value
//           128h + 32c + 4v + k takes its low four bits from the first (c = 0, 2) or second
//           (c = 1, 3) vector's low (c < 2) or high nibble and its top two from bits 2c, 2c+1
//           of the third)                                                                 3072 B
//   An even column is [scales | values | d], an odd one [d | scales | values]: a column is
//   52.5 lines, so an odd one starts half a line in, and this keeps every vector on one line.
// BF16_R16 (in even): a group holds in/2 vectors of 64 B; vector p, bytes 4r..4r+3 = row r's
//   values 2p and 2p+1 (bf16, little-endian), the pair one VDPBF16PS lane multiplies by the
//   activation pair broadcast to all lanes. Why: on row-major bf16 every row is a dot product
//   of its own, ending in a horizontal sum per row and token (about a sixth of a prefill tile's
//   instructions at in = 1536); interleaved, 16 rows accumulate in one register's lanes, and a
//   token's 16 outputs are one store.
// The size equals the row-major matrix's, so views, slices and byte counts are unchanged.
#pragma once
#include <cstddef>
#include <cstdint>

#include "platform/dtype.h"

namespace g4 {

inline constexpr int64_t kInterleaveRows = 16;
// Q8_0_R16 / Q4_0_R16: one block column of a group (16 blocks, scales included).
inline constexpr uint64_t kQ8ColumnBytes = kInterleaveRows * q8_0::kBlockBytes;
inline constexpr uint64_t kQ4ColumnBytes = kInterleaveRows * q4_0::kBlockBytes;
// Q4_K_R16: one super-block column of a group, and where its parts start within it.
inline constexpr uint64_t kQ4KColumnBytes = kInterleaveRows * q4_k::kBlockBytes;
inline constexpr uint64_t kQ4KLowScales = 64, kQ4KHighScales = 192, kQ4KValues = 256;
inline constexpr uint64_t kQ5KColumnBytes = kInterleaveRows * q5_k::kBlockBytes, kQ5KHighBits = 2304;  // Q5_K_R16
// Q6_K_R16: one super-block column, and where the parts of column s start within it.
inline constexpr uint64_t kQ6KColumnBytes = kInterleaveRows * q6_k::kBlockBytes;
inline constexpr uint64_t q6k_d_at(int64_t s) { return s % 2 ? 0 : 3328; }
inline constexpr uint64_t q6k_scales_at(int64_t s) { return s % 2 ? 32 : 0; }
inline constexpr uint64_t q6k_values_at(int64_t s) { return s % 2 ? 288 : 256; }

// Block column b of a group of `blocks` columns whose columns take column_bytes each (16 x block
// bytes): the offsets of its 16 scales and of its first value vector, per the pairing above.
inline constexpr uint64_t interleaved_scales_at(uint64_t column_bytes, int64_t b) {
  return uint64_t(b / 2) * 2 * column_bytes + (b % 2 ? 32 : 0);
}
inline constexpr uint64_t interleaved_values_at(uint64_t column_bytes, int64_t blocks, int64_t b) {
  const uint64_t pair = uint64_t(b / 2) * 2 * column_bytes;
  if (b % 2 == 0 && b + 1 == blocks) return pair + 32;  // an odd last column, alone
  return pair + 64 + (b % 2 ? column_bytes - 32 : 0);
}

// BF16_R16: where row r's values 2p, 2p + 1 sit in its group.
inline constexpr uint64_t bf16_pair_at(int64_t p, int r) { return 64 * uint64_t(p) + 4 * uint64_t(r); }

bool dtype_is_interleaved(DType t);
// Q8_0 -> Q8_0_R16, Q4_0 -> Q4_0_R16, Q4_K -> Q4_K_R16, Q5_K -> Q5_K_R16, Q6_K -> Q6_K_R16,
// BF16 -> BF16_R16; throws g4::Error for any other dtype.
DType interleaved_dtype(DType base);
// Q8_0_R16 -> Q8_0, Q4_0_R16 -> Q4_0, Q4_K_R16 -> Q4_K, Q5_K_R16 -> Q5_K, Q6_K_R16 -> Q6_K,
// BF16_R16 -> BF16; any other dtype is returned as it is.
DType interleave_base(DType t);

// 16 row-major rows of `base` blocks (16 * row_bytes(base, in) bytes) -> one interleaved group
// (the same number of bytes). rows and group must not overlap.
void interleave_group(DType base, const std::byte* rows, int64_t in, std::byte* group);
// Row r (0..15) of an interleaved group back to its row-major bytes (row_bytes(base, in) bytes).
void extract_interleaved_row(DType interleaved, const std::byte* group, int64_t in, int r, std::byte* row);
// Row r of an interleaved [rows, in] matrix as row-major bytes of its base format, in a
// per-thread buffer valid until this thread's next call (for gathers and the reference loops).
const std::byte* interleaved_row(DType interleaved, const std::byte* matrix, int64_t in, int64_t r);

}  // namespace g4
