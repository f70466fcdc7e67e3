#include "platform/row_interleave.h"

#include <cstring>
#include <string>

#include "platform/error.h"

namespace g4 {

bool dtype_is_interleaved(DType t) { return t == DType::Q8_0_R16 || t == DType::Q4_0_R16; }

DType interleaved_dtype(DType base) {
  if (base == DType::Q8_0) return DType::Q8_0_R16;
  if (base == DType::Q4_0) return DType::Q4_0_R16;
  throw Error("row interleaving: only Q8_0 and Q4_0 have an interleaved layout, not " + std::string(dtype_name(base)));
}

DType interleave_base(DType t) {
  if (t == DType::Q8_0_R16) return DType::Q8_0;
  if (t == DType::Q4_0_R16) return DType::Q4_0;
  return t;
}

namespace {
// Where row r's byte `i` of block column b lands in a group; i = 0,1 are the f16 scale.
// Both directions use this one mapping, so extract is interleave's exact inverse.
inline uint64_t group_offset(DType base, int64_t b, int r, int i) {
  const uint64_t bb = dtype_block_bytes(base), col = uint64_t(b) * bb * kInterleaveRows;
  if (i < 2) return col + uint64_t(2 * r + i);
  const int v = i - 2;  // value byte: Q8_0 value v, Q4_0 packed byte v
  return col + 32 + uint64_t(64 * (v / 4) + 4 * r + v % 4);
}
inline bool flips_sign(DType base, int i) { return base == DType::Q8_0 && i >= 2; }
}  // namespace

void interleave_group(DType base, const std::byte* rows, int64_t in, std::byte* group) {
  (void)interleaved_dtype(base);  // validates base
  const uint64_t bb = dtype_block_bytes(base), rb = row_bytes(base, in);
  for (int r = 0; r < kInterleaveRows; ++r)
    for (int64_t b = 0; b < in / 32; ++b)
      for (int i = 0; i < int(bb); ++i) {
        const std::byte v = rows[uint64_t(r) * rb + uint64_t(b) * bb + uint64_t(i)];
        group[group_offset(base, b, r, i)] = flips_sign(base, i) ? (v ^ std::byte{0x80}) : v;
      }
}

void extract_interleaved_row(DType interleaved, const std::byte* group, int64_t in, int r, std::byte* row) {
  const DType base = interleave_base(interleaved);
  if (base == interleaved) throw Error("extract_interleaved_row: " + std::string(dtype_name(interleaved)) + " is not interleaved");
  const uint64_t bb = dtype_block_bytes(base);
  for (int64_t b = 0; b < in / 32; ++b)
    for (int i = 0; i < int(bb); ++i) {
      const std::byte v = group[group_offset(base, b, r, i)];
      row[uint64_t(b) * bb + uint64_t(i)] = flips_sign(base, i) ? (v ^ std::byte{0x80}) : v;
    }
}

}  // namespace g4
