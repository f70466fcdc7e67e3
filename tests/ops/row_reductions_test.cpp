// RMSNorm and argmax on the SIMD path against independent truths: RMSNorm against a
// double-precision evaluation of the formula (and ref::rms_norm within f32 rounding), for
// lengths around the vector width, with f32 and bf16 weights and without (bf16 read as stored
// gives the bits of its f32 copy); argmax against the
// scalar "first strictly greater" scan, with ties, NaN, infinities and all -inf rows.
#include "ops/rows/row_reductions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/ref/reference_ops.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(RowReductions, RmsNormMatchesDoublePrecisionAndTheReference) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (int64_t n : {1, 7, 16, 31, 33, 256, 1536, 2049})
    for (int weights = 0; weights < 3; ++weights) {  // none, f32, bf16
      const int64_t rows = 3;
      std::vector<float> x(static_cast<size_t>(rows * n)), wf(static_cast<size_t>(n));
      for (auto& v : x) v = g(rng);
      for (auto& v : wf) v = round_to_bf16(g(rng));  // exact in both dtypes
      std::vector<uint16_t> wb(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) wb[size_t(i)] = f32_to_bf16(wf[size_t(i)]);
      TensorView w = weights == 1 ? test::matrix_view(DType::F32, 1, n, wf.data())
                                  : test::matrix_view(DType::BF16, 1, n, wb.data());
      w.shape = {n};
      const TensorView* wp = weights == 0 ? nullptr : &w;
      std::vector<float> got = x, ref = x;
      ops::rms_norm(got.data(), rows, n, wp, 1e-6f);
      ref::rms_norm(ref.data(), rows, n, wp, 1e-6f);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
        const double inv = 1.0 / std::sqrt(ss / double(n) + 1e-6);
        for (int64_t i = 0; i < n; ++i) {
          const size_t k = size_t(r * n + i);
          const double want = double(x[k]) * inv * (weights ? double(wf[size_t(i)]) : 1.0);
          EXPECT_NEAR(got[k], want, 1e-5 * std::fabs(want) + 1e-6) << "n " << n << " weights " << weights;
          EXPECT_NEAR(got[k], ref[k], 1e-5f * std::fabs(ref[k]) + 1e-6f) << "n " << n << " weights " << weights;
        }
      }
      if (weights == 2) {  // bf16 weights read in the lanes: the same bits as the f32 copy of them
        TensorView w32 = test::matrix_view(DType::F32, 1, n, wf.data());
        w32.shape = {n};
        std::vector<float> via_f32 = x;
        ops::rms_norm(via_f32.data(), rows, n, &w32, 1e-6f);
        EXPECT_EQ(std::memcmp(got.data(), via_f32.data(), got.size() * sizeof(float)), 0) << "n " << n;
      }
    }
}

TEST(RowReductions, RmsNormRefusesAWeightOfAnotherLength) {
  std::vector<float> x(8, 1.0f), wf(7, 1.0f);
  TensorView w = test::matrix_view(DType::F32, 1, 7, wf.data());
  w.name = "model.layers.3.input_layernorm.weight";
  w.shape = {7};
  try {
    ops::rms_norm(x.data(), 1, 8, &w, 1e-6f);
    ADD_FAILURE() << "a [7] weight was accepted for rows of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.3.input_layernorm.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[8]"), std::string::npos) << e.what();
  }
}

int64_t scalar_argmax(const std::vector<float>& x) {
  float best = -std::numeric_limits<float>::infinity();
  int64_t id = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > best) {
      best = x[i];
      id = int64_t(i);
    }
  return id;
}

TEST(RowReductions, ArgmaxIsTheFirstStrictlyGreater) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (int64_t n : {1, 2, 15, 16, 17, 100, 262144}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = u(rng);
    EXPECT_EQ(ops::argmax(x.data(), n), scalar_argmax(x)) << n;
    std::uniform_int_distribution<int64_t> at(0, n - 1);
    const int64_t a = at(rng), b = at(rng);
    x[size_t(a)] = x[size_t(b)] = 9.0f;  // a tie: the first index wins
    EXPECT_EQ(ops::argmax(x.data(), n), std::min(a, b)) << n;
    x[size_t(at(rng))] = nan;  // NaN never wins
    EXPECT_EQ(ops::argmax(x.data(), n), scalar_argmax(x)) << n;
    x[size_t(n - 1)] = inf;  // +inf wins, even in the scalar tail
    EXPECT_EQ(ops::argmax(x.data(), n), n - 1) << n;
    std::fill(x.begin(), x.end(), -inf);
    EXPECT_EQ(ops::argmax(x.data(), n), 0) << n;
    std::fill(x.begin(), x.end(), nan);
    EXPECT_EQ(ops::argmax(x.data(), n), 0) << n;
    x[size_t(n / 2)] = -inf;  // only NaN and -inf: nothing is greater than -inf
    EXPECT_EQ(ops::argmax(x.data(), n), 0) << n;
  }
}

}  // namespace
}  // namespace g4
