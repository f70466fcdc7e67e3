// Symmetric int8 rows: the definition (scale, clamp, round half to even, all-zero rows), and the
// AVX-512 path bit-identical to the scalar loop for every length (tails included), ties and rows
// whose largest value sits anywhere.
#include "platform/quantize_int8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace g4 {
namespace {

TEST(QuantizeInt8, FollowsTheDefinition) {
  // max|x| = 2.54: scale 0.02, so x / scale = 127, -63.5 (tie -> -64, even), 0.5 (tie -> 0), 12.5 (-> 12).
  const float x[] = {2.54f, -1.27f, 0.01f, 0.25f, -2.54f};
  int8_t q[5];
  const float scale = quantize_int8_symmetric_scalar(x, 5, q);
  EXPECT_FLOAT_EQ(scale, 2.54f / 127.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[4], -127);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q[i], int8_t(std::lrint(x[i] * (1.0f / scale)))) << i;
  const float zeros[3] = {0, -0.0f, 0};
  int8_t qz[3] = {1, 1, 1};
  EXPECT_EQ(quantize_int8_symmetric(zeros, 3, qz), 0.0f);
  EXPECT_EQ(qz[0] | qz[1] | qz[2], 0);
}

TEST(QuantizeInt8, VectorPathEqualsTheScalarLoopBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> tie(-254, 254);
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 100, 256, 512, 1040}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = g(rng) * float(trial % 5 + 1);
      if (trial % 2 == 1) {
        // Values that land exactly on .5 steps after scaling: max|x| = 127 makes the scale 1.
        for (float& v : x) v = float(tie(rng)) / 2.0f;
        x[size_t(trial) % x.size()] = trial % 4 == 1 ? 127.0f : -127.0f;
      }
      std::vector<int8_t> a(x.size()), b(x.size());
      const float sa = quantize_int8_symmetric_scalar(x.data(), n, a.data());
      const float sb = quantize_int8_symmetric(x.data(), n, b.data());
      ASSERT_EQ(std::memcmp(&sa, &sb, 4), 0) << "n " << n << " trial " << trial;
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "n " << n << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace g4
