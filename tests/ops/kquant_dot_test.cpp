// The K-quant kernels (Q4_K, Q5_K, Q6_K): the f32 SIMD super-block dots and the int8 VPDPBUSD
// tiles, against the independent truth: each row dequantized by the GGML-layout decoder
// (platform dequantize_row, checked on hand-built blocks in quant_dot_test) and dotted in double
// precision with the activations the kernel was given (for the int8 tiles, their dequantized int8
// values). Blocks are random bytes, so every scale and fifth/sixth-bit pattern occurs, including
// the packed top bits of sub-blocks 4-7. (The int8 tiles' batching, row-range and rounding-bound
// tests on quantized weights are gemm_q8_test's, parameterised over the K-quants too.)
#include "ops/matmul/kquant_dot_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/matmul/dot_kernels.h"
#include "ops/matmul/gemm_kquant.h"
#include "ops/matmul/gemm_q8.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

const DType kKQuants[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Want {
  double dot = 0, magnitude = 0;  // Σ w·x, and Σ |w·x| (the scale of f32 rounding)
};

Want double_dot(DType t, const std::byte* row, const float* x, int64_t n) {
  std::vector<float> w(static_cast<size_t>(n));
  dequantize_row(t, row, w.data(), n);
  Want r;
  for (int64_t i = 0; i < n; ++i) {
    r.dot += double(w[size_t(i)]) * double(x[i]);
    r.magnitude += std::fabs(double(w[size_t(i)]) * double(x[i]));
  }
  return r;
}

TEST(KQuantDot, RowsMatchDequantizeThenDoubleDotOnRandomBlocks) {
  std::printf("[ kernels ] dispatched target: %s\n", ops::dot_kernel_target());
  std::mt19937 rng(11);
  for (DType t : kKQuants) {
    for (int64_t n : {256, 512, 1536}) {
      for (int rows = 1; rows <= 4; ++rows) {
        for (int rep = 0; rep < 6; ++rep) {
          const size_t rb = row_bytes(t, n);
          const std::vector<std::byte> w = test::random_blocks(t, n * rows, rng);  // rows back to back
          const std::vector<float> x = test::random_activations(n, unsigned(rng()), 1.0f);
          float out[4] = {NAN, NAN, NAN, NAN};
          ASSERT_TRUE(ops::dot_rows_kquant(x.data(), w.data(), rb, t, size_t(n), rows, out)) << dtype_name(t);
          for (int r = 0; r < rows; ++r) {
            const Want want = double_dot(t, w.data() + size_t(r) * rb, x.data(), n);
            // f32 products and sums: a few ulps of the magnitude.
            ASSERT_NEAR(out[r], want.dot, 1e-5 * want.magnitude + 1e-6)
                << dtype_name(t) << " n " << n << " rows " << rows << " row " << r << " rep " << rep;
          }
          for (int r = rows; r < 4; ++r) EXPECT_TRUE(std::isnan(out[r])) << "wrote past `rows`";
        }
      }
    }
  }
}

// A row's sum does not depend on which other rows share the call (decode's row groups end where
// a thread's share ends, so the same row is computed in groups of different sizes).
TEST(KQuantDot, EachRowIsTheSameBitsWhateverTheRowCount) {
  std::mt19937 rng(5);
  for (DType t : kKQuants) {
    const int64_t n = 1024;
    const size_t rb = row_bytes(t, n);
    const std::vector<std::byte> w = test::random_blocks(t, n * 4, rng);
    const std::vector<float> x = test::random_activations(n, 9, 1.0f);
    float four[4], one;
    ASSERT_TRUE(ops::dot_rows_kquant(x.data(), w.data(), rb, t, size_t(n), 4, four));
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(ops::dot_rows_kquant(x.data(), w.data() + size_t(r) * rb, rb, t, size_t(n), 1, &one));
      EXPECT_EQ(std::memcmp(&one, &four[r], 4), 0) << dtype_name(t) << " row " << r << ": " << one << " vs " << four[r];
    }
  }
}

TEST(KQuantDot, DeclinesWhatItDoesNotReadAndWritesNothing) {
  std::mt19937 rng(2);
  const std::vector<std::byte> w = test::random_blocks(DType::Q4_K, 512 * 5, rng);
  const std::vector<float> x(512, 1.0f);
  float out[5] = {NAN, NAN, NAN, NAN, NAN};
  const size_t rb = row_bytes(DType::Q4_K, 512);
  EXPECT_FALSE(ops::dot_rows_kquant(x.data(), w.data(), rb, DType::Q4_0, 512, 1, out));  // not a K-quant
  EXPECT_FALSE(ops::dot_rows_kquant(x.data(), w.data(), rb, DType::Q4_1, 512, 1, out));
  EXPECT_FALSE(ops::dot_rows_kquant(x.data(), w.data(), rb, DType::Q4_K, 384, 1, out));  // not whole super-blocks
  EXPECT_FALSE(ops::dot_rows_kquant(x.data(), w.data(), rb, DType::Q4_K, 512, 0, out));
  EXPECT_FALSE(ops::dot_rows_kquant(x.data(), w.data(), rb, DType::Q4_K, 512, 5, out));
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(dtype_is_kquant(DType::Q6_K));
  EXPECT_FALSE(dtype_is_kquant(DType::Q8_0));
  EXPECT_FALSE(dtype_is_kquant(DType::Q4_1));
}

TEST(GemmKQuant, Int8TilesMatchDequantizedRowsOnRandomBlocks) {
  if (!ops::gemm_q8_avx512()) GTEST_SKIP() << "row-major K-quant int8 kernels: avx512-vnni tier only, this CPU's is "
                                           << int8_dot_name(ops::int8_kernel_tier());
  std::mt19937 rng(17);
  for (DType t : kKQuants) {
    for (int64_t in : {256, 768}) {
      for (int64_t T : {1, 3, 6}) {
        const int64_t out = 7;  // a 4-row tile and a 3-row one
        const size_t rb = row_bytes(t, in);
        const std::vector<std::byte> w = test::random_blocks(t, in * out, rng);
        const std::vector<float> x = test::random_activations(T * in, unsigned(rng()), 1.0f);
        ops::Q8Activations a;
        ops::quantize_activations(x.data(), T, in, a, ops::kQ8RowTiles);
        std::vector<float> xd(x.size());
        for (size_t i = 0; i < xd.size(); ++i) xd[i] = float(a.q[i]) * a.scale[i / 32];
        std::vector<float> got(size_t(T * out), NAN);
        ops::gemm_kquant_rows(a, w.data(), t, 0, out, got.data(), out);
        for (int64_t tt = 0; tt < T; ++tt)
          for (int64_t o = 0; o < out; ++o) {
            const Want want = double_dot(t, w.data() + size_t(o) * rb, xd.data() + tt * in, in);
            ASSERT_NEAR(got[size_t(tt * out + o)], want.dot, 1e-5 * want.magnitude + 1e-6)
                << dtype_name(t) << " in " << in << " T " << T << " token " << tt << " row " << o;
          }
      }
    }
  }
}

TEST(GemmKQuant, RefusesWeightsActivationsOrWidthsItDoesNotRead) {
  if (!ops::gemm_q8_avx512()) GTEST_SKIP() << "row-major K-quant int8 kernels: avx512-vnni tier only, this CPU's is "
                                           << int8_dot_name(ops::int8_kernel_tier());
  std::mt19937 rng(3);
  const std::vector<std::byte> w = test::random_blocks(DType::Q4_K, 256 * 4, rng);
  const std::vector<float> x = test::random_activations(256, 4, 1.0f);
  std::vector<float> y(4);
  ops::Q8Activations panels, tiles, narrow;
  ops::quantize_activations(x.data(), 1, 256, panels, ops::kQ8Panels);
  ops::quantize_activations(x.data(), 1, 256, tiles, ops::kQ8RowTiles);
  ops::quantize_activations(x.data(), 2, 128, narrow, ops::kQ8RowTiles);
  EXPECT_THROW(ops::gemm_kquant_rows(panels, w.data(), DType::Q4_K, 0, 4, y.data(), 4), Error);
  EXPECT_THROW(ops::gemm_kquant_rows(narrow, w.data(), DType::Q4_K, 0, 4, y.data(), 4), Error);
  EXPECT_THROW(ops::gemm_kquant_rows(tiles, w.data(), DType::Q4_0, 0, 4, y.data(), 4), Error);
  EXPECT_NO_THROW(ops::gemm_kquant_rows(tiles, w.data(), DType::Q4_K, 0, 4, y.data(), 4));
}

}  // namespace
}  // namespace g4
