// Block-quantized types: each dot kernel against dequantize-then-f32-dot on random blocks, the
// quantizers' round-trip error, the packed layouts on hand-built blocks, and ref::matmul.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/quant/quant_dot.h"
#include "ops/ref/reference_ops.h"
#include "test_util.h"

namespace g4 {
namespace {

const DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                      DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST(QuantTypes, BlockGeometryMatchesGgml) {
  EXPECT_EQ(row_bytes(DType::Q8_0, 32), 34u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(DType::Q4_1, 32), 20u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 256), 144u);
  EXPECT_EQ(row_bytes(DType::Q5_K, 512), 352u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 128), 0u);  // not whole blocks
  EXPECT_EQ(row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_from_ggml(12), DType::Q4_K);
  EXPECT_EQ(dtype_from_ggml(30), DType::BF16);
  EXPECT_FALSE(dtype_from_ggml(6).has_value());  // Q5_0: not read
  for (DType t : kAll) {
    EXPECT_EQ(dtype_from_ggml(dtype_to_ggml(t)), t);
    EXPECT_EQ(dtype_from_any_name(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_from_any_name("q4_k"), DType::Q4_K);
}

TEST(QuantTypes, DotMatchesDequantizeThenDot) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (DType t : kAll) {
    for (int64_t n : {256, 512, 1024}) {
      for (int rep = 0; rep < 20; ++rep) {
        const auto blocks = test::random_blocks(t, n, rng);
        std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        for (auto& v : x) v = nd(rng);
        dequantize_row(t, blocks.data(), w.data(), n);
        double want = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          want += double(w[size_t(i)]) * x[size_t(i)];
          mag += std::fabs(double(w[size_t(i)]) * x[size_t(i)]);
        }
        const float got = ops::quant_dot(t, blocks.data(), x.data(), n);
        ASSERT_NEAR(got, want, 1e-5 * mag + 1e-6) << dtype_name(t) << " n=" << n << " rep " << rep;
      }
    }
  }
}

TEST(QuantTypes, QuantizeRoundTripErrorIsBounded) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  // Max |error| relative to the block's max |x|: about half a quantization step.
  const std::pair<DType, double> bounds[] = {{DType::F16, 1e-3}, {DType::BF16, 4e-3}, {DType::Q8_0, 0.005},
                                             {DType::Q4_0, 0.07}, {DType::Q4_1, 0.07}, {DType::Q4_K, 0.09},
                                             {DType::Q5_K, 0.045}, {DType::Q6_K, 0.025}};
  for (auto [t, bound] : bounds) {
    const int64_t n = 1024;
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = nd(rng);
    x[5] = 0;
    std::vector<std::byte> q(row_bytes(t, n));
    ops::quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    double worst = 0, amax = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, double(std::fabs(x[i] - y[i])));
      amax = std::max(amax, double(std::fabs(x[i])));
    }
    EXPECT_LE(worst / amax, bound) << dtype_name(t);
    std::printf("[ quant ] %-4s max |x - dq(q(x))| / max|x| = %.4f\n", std::string(dtype_name(t)).c_str(), worst / amax);
    // All-zero blocks stay zero (no division by a zero scale).
    std::vector<float> z(n, 0.0f), zz(n, 1.0f);
    ops::quantize_row(t, z.data(), q.data(), n);
    dequantize_row(t, q.data(), zz.data(), n);
    for (float v : zz) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

TEST(QuantTypes, HandBuiltBlocksDecodeAsGgml) {
  // Q4_0: d = 0.5; byte j holds element j (low nibble) and j + 16 (high nibble); value (q - 8)·d.
  std::vector<std::byte> b(18);
  const uint16_t half = f32_to_f16(0.5f);
  std::memcpy(b.data(), &half, 2);
  b[2] = std::byte(0x9F);  // element 0: 15 -> 3.5; element 16: 9 -> 0.5
  float y[32];
  dequantize_row(DType::Q4_0, b.data(), y, 32);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], 0.5f);
  EXPECT_EQ(y[1], -4.0f);
  // Q8_0: d then int8 values.
  std::vector<std::byte> c(34);
  std::memcpy(c.data(), &half, 2);
  c[2] = std::byte(uint8_t(int8_t(-3)));
  c[33] = std::byte(uint8_t(127));
  dequantize_row(DType::Q8_0, c.data(), y, 32);
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[31], 63.5f);
  // Q6_K: element 0 = d · scales[0] · (low nibble of ql[0] | low 2 bits of qh[0] << 4) - 32.
  std::vector<std::byte> k(210);
  k[0] = std::byte(0x05);
  k[128] = std::byte(0x02);  // bits 4-5 of element 0 -> 0b10 -> q = 5 + 32 - 32 = 5
  k[192] = std::byte(uint8_t(3));
  const uint16_t one = f32_to_f16(1.0f);
  std::memcpy(k.data() + 208, &one, 2);
  float z[256];
  dequantize_row(DType::Q6_K, k.data(), z, 256);
  EXPECT_EQ(z[0], 15.0f);
  EXPECT_EQ(z[1], -96.0f);  // q = 0 - 32, scale 3
  // Q4_K scale packing: sub-blocks 0..3 in the low 6 bits of bytes 0..3 (mins 4..7);
  // sub-blocks 4..7 split across bytes 8..11 (low 4 bits) and the top 2 bits of bytes 0..7.
  uint8_t s[12] = {0};
  s[0] = 0x40 | 5;  // sc0 = 5, top bits of sc4 = 1
  s[8] = 0x32;      // sc4 low = 2, m4 low = 3
  s[4] = 0x80 | 7;  // m0 = 7, top bits of m4 = 2
  uint8_t sc, m;
  kquant_scale_min(0, s, &sc, &m);
  EXPECT_EQ(sc, 5);
  EXPECT_EQ(m, 7);
  kquant_scale_min(4, s, &sc, &m);
  EXPECT_EQ(sc, 2 | (1 << 4));
  EXPECT_EQ(m, 3 | (2 << 4));
}

// The SIMD kernels' unpacking of all eight (scale, min) pairs at once against the one-at-a-time
// decoder above, on random scale bytes (every top-bit combination of sub-blocks 4-7).
TEST(QuantTypes, AllEightKQuantScalesAtOnceMatchOneAtATime) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int rep = 0; rep < 2000; ++rep) {
    uint8_t s[12], both[16];
    for (auto& b : s) b = uint8_t(byte(rng));
    kquant_scales_mins(s, both);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      kquant_scale_min(j, s, &sc, &m);
      ASSERT_EQ(both[j], sc) << "scale " << j << " rep " << rep;
      ASSERT_EQ(both[8 + j], m) << "min " << j << " rep " << rep;
    }
  }
}

TEST(QuantTypes, ReferenceMatmulReadsBlocks) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  const int64_t out = 5, in = 256, T = 3;
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    std::vector<float> wf(size_t(out * in)), x(size_t(T * in)), y(size_t(T * out));
    for (auto& v : wf) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    std::vector<std::byte> q(size_t(out) * row_bytes(t, in));
    for (int64_t o = 0; o < out; ++o) ops::quantize_row(t, &wf[size_t(o * in)], q.data() + o * row_bytes(t, in), in);
    const TensorView w = test::matrix_view(t, out, in, q.data());
    ref::matmul(x.data(), T, w, y.data());
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t o = 0; o < out; ++o) {
      w.row_to_f32(o, row.data());
      EXPECT_EQ(w.at(o * in + 17), row[17]);
      for (int64_t s = 0; s < T; ++s) {
        double want = 0;
        for (int64_t i = 0; i < in; ++i) want += double(row[size_t(i)]) * x[size_t(s * in + i)];
        EXPECT_NEAR(y[size_t(s * out + o)], want, 1e-3) << dtype_name(t);
      }
    }
  }
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// quantize_row (AVX-512 for Q8_0/Q4_0 where the CPU has it) against the scalar quantizers, byte
// for byte, on blocks chosen to reach every branch: ordinary values, all zeros, negative zero,
// ties in magnitude of opposite sign (Q4_0 keeps the first), scales that round to f16
// subnormals or to zero, values near a half step, and blocks holding NaN or infinity.
TEST(QuantTypes, SimdQuantizersEqualTheScalarOnesBitForBit) {
  std::mt19937 rng(17);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t blocks = 64, n = blocks * 32;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<float> x(static_cast<size_t>(n));
    const float magnitude = std::pow(10.0f, float(trial % 10) - 8.0f);  // 1e-8 .. 1e1
    for (auto& v : x) v = g(rng) * magnitude;
    for (int64_t j = 32; j < 64; ++j) x[size_t(j)] = 0.0f;                 // block 1: all zeros
    x[64] = -0.0f;                                                          // block 2: a negative zero
    x[100] = 5.0f * magnitude, x[110] = -5.0f * magnitude;                  // block 3: a tie of opposite signs
    x[140] = -7.0f * magnitude, x[150] = 7.0f * magnitude;                  // block 4: the same, negative first
    for (int64_t j = 160; j < 192; ++j) x[size_t(j)] = float(j - 176) * 0.5f * magnitude;  // block 5: half steps
    if (trial % 3 == 0) x[200] = std::nanf("");                             // block 6: NaN
    if (trial % 3 == 1) x[230] = -INFINITY;                                 // block 7: infinity
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
      std::vector<std::byte> fast(row_bytes(t, n)), slow(row_bytes(t, n));
      ops::quantize_row(t, x.data(), fast.data(), n);
      ops::quantize_row_scalar(t, x.data(), slow.data(), n);
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t bb = dtype_block_bytes(t);
        ASSERT_EQ(0, std::memcmp(&fast[size_t(b) * bb], &slow[size_t(b) * bb], bb))
            << dtype_name(t) << " trial " << trial << " block " << b;
      }
    }
  }
}

}  // namespace
}  // namespace g4
