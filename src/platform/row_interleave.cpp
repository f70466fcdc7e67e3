#include "platform/row_interleave.h"

#include <cstring>
#include <string>
#include <vector>

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
// Where row r's block b (of `blocks`) lands in a group: its f16 scale, and its value bytes
// v..v+3 (v a multiple of 4). Both directions use these, so extract is interleave's exact inverse.
inline uint64_t scale_at(uint64_t bb, int64_t b, int r) {
  return interleaved_scales_at(bb * kInterleaveRows, b) + 2 * uint64_t(r);
}
inline uint64_t unit_at(uint64_t bb, int64_t blocks, int64_t b, int r, uint64_t v) {
  return interleaved_values_at(bb * kInterleaveRows, blocks, b) + 64 * (v / 4) + 4 * uint64_t(r);
}
// Q8_0 values flip their sign bits (int8 <-> offset binary); Q4_0 bytes move unchanged.
inline uint32_t flip_of(DType base) { return base == DType::Q8_0 ? 0x80808080u : 0u; }

inline void move_unit(const std::byte* from, std::byte* to, uint32_t flip) {
  uint32_t u;
  std::memcpy(&u, from, 4);
  u ^= flip;
  std::memcpy(to, &u, 4);
}
}  // namespace

void interleave_group(DType base, const std::byte* rows, int64_t in, std::byte* group) {
  (void)interleaved_dtype(base);  // validates base
  const uint64_t rb = row_bytes(base, in), bb = dtype_block_bytes(base);
  const uint32_t flip = flip_of(base);
  for (int r = 0; r < kInterleaveRows; ++r)
    for (int64_t b = 0; b < in / 32; ++b) {
      const std::byte* src = rows + uint64_t(r) * rb + uint64_t(b) * bb;
      std::memcpy(group + scale_at(bb, b, r), src, 2);
      for (uint64_t v = 0; v + 2 < bb; v += 4) move_unit(src + 2 + v, group + unit_at(bb, in / 32, b, r, v), flip);
    }
}

void extract_interleaved_row(DType interleaved, const std::byte* group, int64_t in, int r, std::byte* row) {
  const DType base = interleave_base(interleaved);
  if (base == interleaved) throw Error("extract_interleaved_row: " + std::string(dtype_name(interleaved)) + " is not interleaved");
  const uint64_t bb = dtype_block_bytes(base);
  const uint32_t flip = flip_of(base);
  for (int64_t b = 0; b < in / 32; ++b) {
    std::byte* dst = row + uint64_t(b) * bb;
    std::memcpy(dst, group + scale_at(bb, b, r), 2);
    for (uint64_t v = 0; v + 2 < bb; v += 4) move_unit(group + unit_at(bb, in / 32, b, r, v), dst + 2 + v, flip);
  }
}

const std::byte* interleaved_row(DType interleaved, const std::byte* matrix, int64_t in, int64_t r) {
  const uint64_t rb = row_bytes(interleave_base(interleaved), in);
  thread_local std::vector<std::byte> row;
  row.resize(rb);
  extract_interleaved_row(interleaved, matrix + uint64_t(r / kInterleaveRows) * kInterleaveRows * rb, in,
                          int(r % kInterleaveRows), row.data());
  return row.data();
}

}  // namespace g4
