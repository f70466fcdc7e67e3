#include "platform/row_interleave.h"

#include <cstring>
#include <string>
#include <vector>

#include "platform/error.h"

namespace g4 {

bool dtype_is_interleaved(DType t) {
  return t == DType::Q8_0_R16 || t == DType::Q4_0_R16 || t == DType::Q4_K_R16 || t == DType::Q5_K_R16 ||
         t == DType::Q6_K_R16 || t == DType::BF16_R16;
}

DType interleaved_dtype(DType base) {
  if (base == DType::Q8_0) return DType::Q8_0_R16;
  if (base == DType::Q4_0) return DType::Q4_0_R16;
  if (base == DType::Q4_K) return DType::Q4_K_R16;
  if (base == DType::Q5_K) return DType::Q5_K_R16;
  if (base == DType::Q6_K) return DType::Q6_K_R16;
  if (base == DType::BF16) return DType::BF16_R16;
  throw Error("row interleaving: only Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and BF16 have an interleaved layout, not " +
              std::string(dtype_name(base)));
}

DType interleave_base(DType t) {
  if (t == DType::Q8_0_R16) return DType::Q8_0;
  if (t == DType::Q4_0_R16) return DType::Q4_0;
  if (t == DType::Q4_K_R16) return DType::Q4_K;
  if (t == DType::Q5_K_R16) return DType::Q5_K;
  if (t == DType::Q6_K_R16) return DType::Q6_K;
  if (t == DType::BF16_R16) return DType::BF16;
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

// Q4_K_R16: row r's super-block (144 B: d, dmin, 12 scale bytes, 128 value bytes) to or from
// its places in a super-block column `col` (layout in row_interleave.h). The 12 packed bytes
// hold exactly the 8 six-bit scales and mins, so they are rebuilt bit for bit.
// Q5_K_R16: the same, the values at 48 in the block (after 32 B of fifth bits) and the fifth
// bits moved to the column's kQ5KHighBits vectors.
void q4k_block_to_column(const std::byte* blk, int r, std::byte* col, bool q5) {
  std::memcpy(col + 2 * r, blk + q4_k::kDAt, 2);
  std::memcpy(col + 32 + 2 * r, blk + q4_k::kDminAt, 2);
  uint8_t sm[16];
  kquant_scales_mins(reinterpret_cast<const uint8_t*>(blk + q4_k::kScalesAt), sm);
  for (int j = 0; j < 8; ++j) {
    const uint8_t sc = sm[j], m = sm[8 + j];
    col[kQ4KLowScales + 16 * j + r] = std::byte((sc & 15) | (m & 15) << 4);
    const uint8_t hi = uint8_t((sc >> 4) | (m >> 4) << 2);
    std::byte& h = col[kQ4KHighScales + 16 * (j / 2) + r];
    h = j % 2 ? (h & std::byte{0x0F}) | std::byte(hi << 4) : (h & std::byte{0xF0}) | std::byte(hi);
  }
  for (int k = 0; k < 4; ++k)
    for (int v = 0; v < 8; ++v)
      std::memcpy(col + kQ4KValues + 512 * k + 64 * v + 4 * r, blk + (q5 ? q5_k::kQsAt : q4_k::kQsAt) + 32 * k + 4 * v, 4);
  if (q5)
    for (int v = 0; v < 8; ++v) std::memcpy(col + kQ5KHighBits + 64 * v + 4 * r, blk + q5_k::kQhAt + 4 * v, 4);
}

void q4k_column_to_block(const std::byte* col, int r, std::byte* blk, bool q5) {
  std::memcpy(blk + q4_k::kDAt, col + 2 * r, 2);
  std::memcpy(blk + q4_k::kDminAt, col + 32 + 2 * r, 2);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    const uint8_t lo = uint8_t(col[kQ4KLowScales + 16 * j + r]);
    const uint8_t hi = uint8_t(uint8_t(col[kQ4KHighScales + 16 * (j / 2) + r]) >> (4 * (j % 2))) & 15;
    sc[j] = uint8_t((lo & 15) | (hi & 3) << 4);
    m[j] = uint8_t((lo >> 4) | (hi >> 2) << 4);
  }
  uint8_t* q = reinterpret_cast<uint8_t*>(blk + q4_k::kScalesAt);  // the inverse of kquant_scale_min's unpacking
  for (int j = 0; j < 4; ++j) {
    q[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
    q[j + 4] = uint8_t(m[j] | (m[j + 4] >> 4) << 6);
    q[j + 8] = uint8_t((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
  for (int k = 0; k < 4; ++k)
    for (int v = 0; v < 8; ++v)
      std::memcpy(blk + (q5 ? q5_k::kQsAt : q4_k::kQsAt) + 32 * k + 4 * v, col + kQ4KValues + 512 * k + 64 * v + 4 * r, 4);
  if (q5)
    for (int v = 0; v < 8; ++v) std::memcpy(blk + q5_k::kQhAt + 4 * v, col + kQ5KHighBits + 64 * v + 4 * r, 4);
}

// Q6_K_R16: row r's super-block (210 B: ql[128], qh[64], int8 scales[16], f16 d) to or from its
// places in column s (`col` its start). Bytes move unchanged, so the two are exact inverses.
template <bool kToColumn>
void q6k_move(std::byte* blk, int r, std::byte* col, int64_t s) {
  auto move = [](std::byte* b, std::byte* c, size_t n) {
    if constexpr (kToColumn) std::memcpy(c, b, n);
    else std::memcpy(b, c, n);
  };
  move(blk + q6_k::kDAt, col + q6k_d_at(s) + 2 * r, 2);
  for (int i = 0; i < q6_k::kSubBlocks; ++i) move(blk + q6_k::kScalesAt + i, col + q6k_scales_at(s) + 16 * i + r, 1);
  for (int h = 0; h < 2; ++h)
    for (int v = 0; v < 8; ++v) {
      std::byte* vec = col + q6k_values_at(s) + 1536 * h + 192 * v + 4 * r;
      move(blk + q6_k::kQlAt + 64 * h + 4 * v, vec, 4);
      move(blk + q6_k::kQlAt + 64 * h + 32 + 4 * v, vec + 64, 4);
      move(blk + q6_k::kQhAt + 32 * h + 4 * v, vec + 128, 4);
    }
}
}  // namespace

void interleave_group(DType base, const std::byte* rows, int64_t in, std::byte* group) {
  (void)interleaved_dtype(base);  // validates base
  const uint64_t rb = row_bytes(base, in), bb = dtype_block_bytes(base);
  if (base == DType::BF16) {
    if (in % 2) throw Error("row interleaving: BF16 rows of " + std::to_string(in) + " values (odd) have no pair layout");
    for (int r = 0; r < kInterleaveRows; ++r)
      for (int64_t p = 0; p < in / 2; ++p) std::memcpy(group + bf16_pair_at(p, r), rows + uint64_t(r) * rb + 4 * uint64_t(p), 4);
    return;
  }
  if (base == DType::Q6_K) {
    for (int r = 0; r < kInterleaveRows; ++r)
      for (int64_t s = 0; s < in / q4_k::kBlockValues; ++s)
        q6k_move<true>(const_cast<std::byte*>(rows + uint64_t(r) * rb + uint64_t(s) * bb), r,
                       group + uint64_t(s) * kQ6KColumnBytes, s);  // reads the row only
    return;
  }
  if (base == DType::Q4_K || base == DType::Q5_K) {
    const bool q5 = base == DType::Q5_K;
    const uint64_t column = q5 ? kQ5KColumnBytes : kQ4KColumnBytes;
    for (int r = 0; r < kInterleaveRows; ++r)
      for (int64_t s = 0; s < in / q4_k::kBlockValues; ++s)
        q4k_block_to_column(rows + uint64_t(r) * rb + uint64_t(s) * bb, r, group + uint64_t(s) * column, q5);
    return;
  }
  const uint32_t flip = flip_of(base);  // Q8_0 or Q4_0: the same block size and field offsets
  for (int r = 0; r < kInterleaveRows; ++r)
    for (int64_t b = 0; b < in / q8_0::kBlockValues; ++b) {
      const std::byte* src = rows + uint64_t(r) * rb + uint64_t(b) * bb;
      std::memcpy(group + scale_at(bb, b, r), src, 2);
      for (uint64_t v = 0; v + 2 < bb; v += 4) move_unit(src + q8_0::kQsAt + v, group + unit_at(bb, in / q8_0::kBlockValues, b, r, v), flip);
    }
}

void extract_interleaved_row(DType interleaved, const std::byte* group, int64_t in, int r, std::byte* row) {
  const DType base = interleave_base(interleaved);
  if (base == interleaved) throw Error("extract_interleaved_row: " + std::string(dtype_name(interleaved)) + " is not interleaved");
  const uint64_t bb = dtype_block_bytes(base);
  if (base == DType::BF16) {
    for (int64_t p = 0; p < in / 2; ++p) std::memcpy(row + 4 * uint64_t(p), group + bf16_pair_at(p, r), 4);
    return;
  }
  if (base == DType::Q6_K) {
    for (int64_t s = 0; s < in / q4_k::kBlockValues; ++s)
      q6k_move<false>(row + uint64_t(s) * bb, r, const_cast<std::byte*>(group + uint64_t(s) * kQ6KColumnBytes), s);
    return;
  }
  if (base == DType::Q4_K || base == DType::Q5_K) {
    const bool q5 = base == DType::Q5_K;
    const uint64_t column = q5 ? kQ5KColumnBytes : kQ4KColumnBytes;
    for (int64_t s = 0; s < in / q4_k::kBlockValues; ++s) q4k_column_to_block(group + uint64_t(s) * column, r, row + uint64_t(s) * bb, q5);
    return;
  }
  const uint32_t flip = flip_of(base);
  for (int64_t b = 0; b < in / q8_0::kBlockValues; ++b) {
    std::byte* dst = row + uint64_t(b) * bb;
    std::memcpy(dst, group + scale_at(bb, b, r), 2);
    for (uint64_t v = 0; v + 2 < bb; v += 4) move_unit(group + unit_at(bb, in / q8_0::kBlockValues, b, r, v), dst + q8_0::kQsAt + v, flip);
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
