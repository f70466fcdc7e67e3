// The interleaved layouts against the row-major blocks they come from: a lossless round trip,
// the documented byte positions, the same values through TensorView, and clear refusals where
// a contiguous row is asked of them.
#include "platform/row_interleave.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "platform/error.h"
#include "platform/tensor_view.h"

namespace g4 {
namespace {

// `rows` row-major rows of random blocks of `base` with finite f16 scales.
std::vector<std::byte> random_rows(DType base, int64_t rows, int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  const uint64_t bb = dtype_block_bytes(base), rb = row_bytes(base, in);
  std::vector<std::byte> v(size_t(rb * uint64_t(rows)));
  for (auto& b : v) b = std::byte(rng() & 0xFF);
  std::normal_distribution<float> g(0.0f, 0.01f);
  if (base == DType::BF16) {  // finite values (random bits would hold NaNs, which compare unequal)
    for (size_t i = 0; i + 1 < v.size(); i += 2) {
      const uint16_t h = f32_to_bf16(g(rng));
      std::memcpy(&v[i], &h, 2);
    }
    return v;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < in / dtype_block_size(base); ++b)
      for (int k = 0; k < (base == DType::Q4_K || base == DType::Q5_K ? 2 : 1); ++k) {  // Q4/5_K: d, dmin; Q6_K: d at its end
        const uint16_t d = f32_to_f16(g(rng));
        const uint64_t at = base == DType::Q6_K ? 208 : 2 * uint64_t(k);
        std::memcpy(&v[size_t(uint64_t(r) * rb + uint64_t(b) * bb + at)], &d, 2);
      }
  return v;
}

// Widths with whole blocks: for Q4_K whole super-blocks of 256.
std::vector<int64_t> widths(DType base) {
  return dtype_block_size(base) == 256 ? std::vector<int64_t>{256, 512, 1536} : std::vector<int64_t>{32, 96, 1536};
}

class RowInterleave : public ::testing::TestWithParam<DType> {};

TEST_P(RowInterleave, RoundTripsEveryRowByteForByte) {
  const DType base = GetParam(), il = interleaved_dtype(base);
  EXPECT_TRUE(dtype_is_interleaved(il));
  EXPECT_EQ(interleave_base(il), base);
  EXPECT_EQ(row_bytes(il, 768), row_bytes(base, 768));  // same size as the row-major matrix
  for (int64_t in : widths(base)) {
    const std::vector<std::byte> rows = random_rows(base, kInterleaveRows, in, unsigned(in));
    std::vector<std::byte> group(rows.size(), std::byte{0xAA});
    interleave_group(base, rows.data(), in, group.data());
    EXPECT_NE(group, rows);
    const uint64_t rb = row_bytes(base, in);
    std::vector<std::byte> back(rb);
    for (int r = 0; r < kInterleaveRows; ++r) {
      extract_interleaved_row(il, group.data(), in, r, back.data());
      EXPECT_EQ(0, std::memcmp(back.data(), &rows[size_t(rb * uint64_t(r))], rb)) << "in " << in << " row " << r;
    }
  }
}

// The byte positions the header documents, written out here independently of the library.
TEST(RowInterleave, BytesSitWhereTheHeaderSays) {
  for (DType base : {DType::Q8_0, DType::Q4_0}) {  // the K-quants: Q4K/Q6KBytesSitWhereTheHeaderSays
    const int64_t in = 96;  // three block columns: one pair, then an odd last column alone
    const std::vector<std::byte> rows = random_rows(base, kInterleaveRows, in, 7);
    std::vector<std::byte> group(rows.size());
    interleave_group(base, rows.data(), in, group.data());
    const uint64_t bb = dtype_block_bytes(base), rb = row_bytes(base, in), column = bb * 16, values = column - 32;
    // The header's layout written out: [scales 0 | scales 1 | values 0 | values 1] [scales 2 | values 2].
    const uint64_t scales_at[3] = {0, 32, 2 * column}, values_at[3] = {64, 64 + values, 2 * column + 32};
    for (int r = 0; r < 16; ++r)
      for (int64_t b = 0; b < in / 32; ++b) {
        const std::byte* src = &rows[size_t(uint64_t(r) * rb + uint64_t(b) * bb)];
        const std::byte* scales = &group[size_t(scales_at[b])];
        const std::byte* vals = &group[size_t(values_at[b])];
        EXPECT_EQ(scales[2 * r], src[0]);
        EXPECT_EQ(scales[2 * r + 1], src[1]);
        for (int v = 0; v < int(bb) - 2; ++v) {
          const std::byte want = base == DType::Q8_0 ? (src[2 + v] ^ std::byte{0x80}) : src[2 + v];
          EXPECT_EQ(vals[64 * (v / 4) + 4 * r + v % 4], want) << dtype_name(base) << " row " << r << " block " << b
                                                               << " byte " << v;
        }
      }
  }
}

TEST_P(RowInterleave, ViewsReadTheSameValues) {
  const DType base = GetParam();
  const int64_t out = 48, in = widths(base)[1];
  const std::vector<std::byte> rows = random_rows(base, out, in, 3);
  std::vector<std::byte> packed(rows.size());
  const uint64_t group = row_bytes(base, in) * 16;
  for (int64_t gi = 0; gi < out / 16; ++gi)
    interleave_group(base, &rows[size_t(group * uint64_t(gi))], in, &packed[size_t(group * uint64_t(gi))]);
  TensorView a, b;
  a.dtype = base;
  b.dtype = interleaved_dtype(base);
  a.shape = b.shape = {out, in};
  a.data = rows.data();
  b.data = packed.data();
  a.nbytes = b.nbytes = rows.size();
  std::vector<float> ra(static_cast<size_t>(in)), rb(static_cast<size_t>(in));
  for (int64_t r = 0; r < out; ++r) {
    a.row_to_f32(r, ra.data());
    b.row_to_f32(r, rb.data());
    EXPECT_EQ(ra, rb) << "row " << r;
  }
  EXPECT_EQ(a.at(47 * in + in - 1), b.at(47 * in + in - 1));
  EXPECT_EQ(a.at(17 * in + 3), b.at(17 * in + 3));
}

// BF16_R16's positions as the header states them: row r's values 2p, 2p + 1 at bytes 64p + 4r.
TEST(RowInterleave, Bf16PairsSitWhereTheHeaderSays) {
  const int64_t in = 70;
  const std::vector<std::byte> rows = random_rows(DType::BF16, kInterleaveRows, in, 11);
  std::vector<std::byte> group(rows.size());
  interleave_group(DType::BF16, rows.data(), in, group.data());
  for (int r = 0; r < 16; ++r)
    for (int64_t i = 0; i < in; ++i) {
      uint16_t want, got;
      std::memcpy(&want, &rows[size_t(2 * (r * in + i))], 2);
      std::memcpy(&got, &group[size_t(64 * (i / 2) + 4 * r + 2 * (i % 2))], 2);
      EXPECT_EQ(got, want) << "row " << r << " value " << i;
    }
  std::vector<std::byte> odd(16 * 2 * 7);
  EXPECT_THROW(interleave_group(DType::BF16, odd.data(), 7, group.data()), Error);  // an odd width has no pairs
}

INSTANTIATE_TEST_SUITE_P(Formats, RowInterleave,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// Q4_K_R16's positions as the header states them, the scales and mins taken apart by the scalar
// kquant_scale_min (the dequantizer's own), not by the library's interleaving code.
TEST(RowInterleave, Q4KBytesSitWhereTheHeaderSays) {
  const int64_t in = 512;  // two super-block columns
  const std::vector<std::byte> rows = random_rows(DType::Q4_K, kInterleaveRows, in, 9);
  std::vector<std::byte> group(rows.size());
  interleave_group(DType::Q4_K, rows.data(), in, group.data());
  const uint64_t rb = row_bytes(DType::Q4_K, in);
  for (int r = 0; r < 16; ++r)
    for (int64_t s = 0; s < in / 256; ++s) {
      const std::byte* src = &rows[size_t(uint64_t(r) * rb + uint64_t(s) * 144)];
      const std::byte* col = &group[size_t(uint64_t(s) * 2304)];
      EXPECT_EQ(0, std::memcmp(col + 2 * r, src, 2)) << "d, row " << r;
      EXPECT_EQ(0, std::memcmp(col + 32 + 2 * r, src + 2, 2)) << "dmin, row " << r;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kquant_scale_min(j, reinterpret_cast<const uint8_t*>(src + 4), &sc, &m);
        const uint8_t low = uint8_t(col[64 + 16 * j + r]), high = uint8_t(col[192 + 16 * (j / 2) + r]) >> (4 * (j % 2));
        EXPECT_EQ(low & 15, sc & 15) << "row " << r << " sub-block " << j;
        EXPECT_EQ(low >> 4, m & 15) << "row " << r << " sub-block " << j;
        EXPECT_EQ(high & 3, sc >> 4) << "row " << r << " sub-block " << j;
        EXPECT_EQ((high >> 2) & 3, m >> 4) << "row " << r << " sub-block " << j;
      }
      for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 32; ++i)  // packed byte 32k + i of the row: vector i / 4, byte 4r + i % 4
          EXPECT_EQ(col[256 + 512 * k + 64 * (i / 4) + 4 * r + i % 4], src[16 + 32 * k + i]) << "row " << r << " chunk " << k;
    }
}

// Q5_K_R16: the Q4_K parts as Q4KBytesSitWhereTheHeaderSays checks them, and each value's 5-bit
// code rebuilt from the layout as the header describes it against the code the scalar dequantizer
// reads (d = 1, dmin = 0, every scale 1: value = code).
TEST(RowInterleave, Q5KCodesSitWhereTheHeaderSays) {
  const int64_t in = 512;
  std::vector<std::byte> rows = random_rows(DType::Q5_K, kInterleaveRows, in, 17);
  const uint64_t rb = row_bytes(DType::Q5_K, in);
  std::vector<std::byte> unit = rows;
  const uint8_t unit_scales[12] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};  // scale 1, min 0 for all 8
  for (int r = 0; r < 16; ++r)
    for (int64_t s = 0; s < in / 256; ++s) {
      std::byte* blk = &unit[size_t(uint64_t(r) * rb + uint64_t(s) * 176)];
      const uint16_t one = f32_to_f16(1.0f), zero = 0;
      std::memcpy(blk, &one, 2);
      std::memcpy(blk + 2, &zero, 2);
      std::memcpy(blk + 4, unit_scales, 12);
    }
  std::vector<std::byte> group(rows.size());
  interleave_group(DType::Q5_K, rows.data(), in, group.data());
  std::vector<float> codes(static_cast<size_t>(in));
  for (int r = 0; r < 16; ++r) {
    dequantize_row(DType::Q5_K, &unit[size_t(uint64_t(r) * rb)], codes.data(), in);
    for (int64_t s = 0; s < in / 256; ++s) {
      const std::byte* col = &group[size_t(uint64_t(s) * 2816)];
      const std::byte* src = &rows[size_t(uint64_t(r) * rb + uint64_t(s) * 176)];
      EXPECT_EQ(0, std::memcmp(col + 2 * r, src, 2)) << "d, row " << r;
      EXPECT_EQ(0, std::memcmp(col + 32 + 2 * r, src + 2, 2)) << "dmin, row " << r;
      for (int n = 0; n < 256; ++n) {
        const int k = n / 64, sub = n % 64 / 32, i = n % 32;  // chunk, low/high nibble, value in sub-block
        const uint8_t packed = uint8_t(col[256 + 512 * k + 64 * (i / 4) + 4 * r + i % 4]);
        const uint8_t high = uint8_t(col[2304 + 64 * (i / 4) + 4 * r + i % 4]) >> (2 * k + sub) & 1;
        EXPECT_EQ(float((sub ? packed >> 4 : packed & 15) | high << 4), codes[size_t(s * 256 + n)])
            << "row " << r << " value " << s * 256 + n;
      }
    }
  }
}

// Q6_K_R16's positions as the header states them, for an even and an odd column (their parts in
// different orders), each value's 6-bit code rebuilt from the layout as the header describes it
// and compared with the code the scalar dequantizer reads (dequantize_row with d = 1, scales 1).
TEST(RowInterleave, Q6KBytesSitWhereTheHeaderSays) {
  const int64_t in = 512;
  std::vector<std::byte> rows = random_rows(DType::Q6_K, kInterleaveRows, in, 13);
  const uint64_t rb = row_bytes(DType::Q6_K, in);
  std::vector<std::byte> unit = rows;  // the same codes with d = 1 and every scale 1: value = code - 32
  for (int r = 0; r < 16; ++r)
    for (int64_t s = 0; s < in / 256; ++s) {
      std::byte* blk = &unit[size_t(uint64_t(r) * rb + uint64_t(s) * 210)];
      for (int i = 0; i < 16; ++i) blk[192 + i] = std::byte{1};
      const uint16_t one = f32_to_f16(1.0f);
      std::memcpy(blk + 208, &one, 2);
    }
  std::vector<std::byte> group(rows.size());
  interleave_group(DType::Q6_K, rows.data(), in, group.data());
  std::vector<float> codes(static_cast<size_t>(in));
  for (int r = 0; r < 16; ++r) {
    dequantize_row(DType::Q6_K, &unit[size_t(uint64_t(r) * rb)], codes.data(), in);
    for (int64_t s = 0; s < in / 256; ++s) {
      const std::byte* src = &rows[size_t(uint64_t(r) * rb + uint64_t(s) * 210)];
      const std::byte* col = &group[size_t(uint64_t(s) * 3360)];
      const uint64_t d_at = s % 2 ? 0 : 3328, scales_at = s % 2 ? 32 : 0, values_at = s % 2 ? 288 : 256;
      EXPECT_EQ(0, std::memcmp(col + d_at + 2 * r, src + 208, 2)) << "d, row " << r << " column " << s;
      for (int i = 0; i < 16; ++i) EXPECT_EQ(col[scales_at + 16 * i + r], src[192 + i]) << "scale " << i << " row " << r;
      for (int n = 0; n < 256; ++n) {
        const int h = n / 128, c = n % 128 / 32, v = n % 32 / 4, k = n % 4;
        const std::byte* vec = col + values_at + 1536 * h + 192 * v + 4 * r + k;
        const uint8_t low = uint8_t(vec[c % 2 ? 64 : 0]) >> (c < 2 ? 0 : 4) & 15;
        const uint8_t top = uint8_t(vec[128]) >> (2 * c) & 3;
        EXPECT_EQ(float(int(low | top << 4) - 32), codes[size_t(s * 256 + n)]) << "row " << r << " value " << s * 256 + n;
      }
    }
  }
}

TEST(RowInterleaveRefusals, NoContiguousRowNoFileTypeNoCliName) {
  std::vector<std::byte> block(34);
  float out[32];
  EXPECT_THROW(dequantize_row(DType::Q8_0_R16, block.data(), out, 32), Error);
  EXPECT_THROW(dtype_to_ggml(DType::Q4_0_R16), Error);
  EXPECT_THROW(interleaved_dtype(DType::Q4_1), Error);
  EXPECT_FALSE(dtype_from_any_name("Q8_0_R16").has_value());  // not a format a user can ask for
  EXPECT_EQ(dtype_name(DType::Q4_0_R16), "Q4_0_R16");
  EXPECT_EQ(interleave_base(DType::BF16), DType::BF16);
  EXPECT_THROW(interleaved_dtype(DType::F16), Error);
  EXPECT_THROW(dequantize_row(DType::BF16_R16, block.data(), out, 2), Error);
  EXPECT_THROW(dtype_to_ggml(DType::BF16_R16), Error);
  EXPECT_FALSE(dtype_from_any_name("BF16_R16").has_value());
  EXPECT_EQ(row_bytes(DType::BF16_R16, 1536), row_bytes(DType::BF16, 1536));
  EXPECT_EQ(row_bytes(DType::BF16_R16, 7), 0u);  // odd widths: not representable
}

}  // namespace
}  // namespace g4
