// SIMD GELU(tanh) and soft-capping against the reference scalar ops.
#include "ops/rows/activation_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/ref/reference_ops.h"

namespace g4 {
namespace {

TEST(Activation, GeluTanhMulMatchesReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (size_t n : {size_t(1), size_t(7), size_t(16), size_t(17), size_t(6144), size_t(1001)}) {
    std::vector<float> x(n), u(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = g(rng);
      u[i] = g(rng);
    }
    x[0] = n > 1 ? -12.0f : 30.0f;  // saturated tails
    std::vector<float> got = x, got_nou = x;
    ops::gelu_tanh_mul(got.data(), u.data(), n);
    ops::gelu_tanh_mul(got_nou.data(), nullptr, n);
    for (size_t i = 0; i < n; ++i) {
      const float want = ref::gelu_tanh(x[i]);
      ASSERT_NEAR(got_nou[i], want, 2e-6f * (1.0f + std::fabs(want))) << "n " << n << " x " << x[i];
      ASSERT_NEAR(got[i], want * u[i], 2e-6f * (1.0f + std::fabs(want * u[i]))) << "n " << n << " x " << x[i];
    }
  }
}

TEST(Activation, SoftcapMatchesReference) {
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.0f, 40.0f);
  for (size_t n : {size_t(3), size_t(16), size_t(262145)}) {
    std::vector<float> x(n);
    for (auto& v : x) v = g(rng);
    std::vector<float> got = x;
    ops::softcap(got.data(), n, 30.0f);
    for (size_t i = 0; i < n; ++i) {
      const float want = 30.0f * std::tanh(x[i] / 30.0f);
      ASSERT_NEAR(got[i], want, 4e-6f * 30.0f) << x[i];
    }
  }
}

}  // namespace
}  // namespace g4
