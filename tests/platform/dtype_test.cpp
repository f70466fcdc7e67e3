#include "platform/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace g4 {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // sqrt(1536) = 39.1918...; the reference rounds the embedding scale to bf16 = 39.25.
  EXPECT_FLOAT_EQ(round_to_bf16(std::sqrt(1536.0f)), 39.25f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16RoundTripAndLimits) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604645e-08f, 0.1f}) {
    float r = round_to_f16(f);
    EXPECT_NEAR(r, f, std::fabs(f) * 1e-3f + 6e-8f) << f;
  }
  EXPECT_TRUE(std::isinf(round_to_f16(65520.0f)));  // largest finite f16 is 65504
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604645e-08f);  // smallest subnormal
}

}  // namespace g4
