#include "gpu/shader_tiles.h"

#include <gtest/gtest.h>

#include "gpu/gpu_presets.h"
#include "platform/error.h"

namespace g4::gpu {

TEST(ShaderTiles, SharedBytesFollowTheShadersArrays) {
  // xs[BM * (BK + 1)] + ws[BN * (BK + 1)] floats.
  EXPECT_EQ(matmul_shared_bytes({64, 64, 32, 64}), (64u + 64u) * 33u * 4u);
  EXPECT_EQ(matmul_shared_bytes({16, 16, 16, 64}), 2176u);
}

TEST(ShaderTiles, LadderIsLargestFirstAndEachTileSplitsEvenlyOverItsWorkgroup) {
  const auto& ladder = matmul_tile_ladder();
  ASSERT_GE(ladder.size(), 2u);
  for (size_t i = 0; i < ladder.size(); ++i) {
    EXPECT_EQ((ladder[i].rows * ladder[i].cols) % ladder[i].workgroup, 0u);
    if (i > 0) {
      EXPECT_LT(matmul_shared_bytes(ladder[i]), matmul_shared_bytes(ladder[i - 1]));
    }
  }
}

TEST(ShaderTiles, LavapipeAndNvidiaTakeTheLargestTile) {
  for (const VulkanDeviceInfo& d : {presets::lavapipe(), presets::tesla_t4(), presets::nvidia_h100()}) {
    const ShaderTilePlan plan = plan_matmul_tile(d);
    EXPECT_EQ(plan.tile, matmul_tile_ladder().front()) << d.name;
    EXPECT_FALSE(plan.shrunk);
    EXPECT_LE(plan.shared_bytes, d.max_shared_memory_bytes);
  }
}

TEST(ShaderTiles, HalfOfLavapipesSharedMemoryTakesASmallerTile) {
  const VulkanDeviceInfo half = presets::with_shared_memory(presets::lavapipe(), 16 * 1024);
  const ShaderTilePlan plan = plan_matmul_tile(half);
  EXPECT_EQ(plan.tile, (MatmulTile{32, 32, 32, 64}));
  EXPECT_TRUE(plan.shrunk);
  EXPECT_EQ(plan.shared_bytes, 8448u);
  EXPECT_EQ(plan.limit_bytes, 16384u);
  EXPECT_NE(plan.text.find("8.2 KiB of 16 KiB"), std::string::npos) << plan.text;
}

TEST(ShaderTiles, TooLittleSharedMemoryIsRefusedWithTheArithmetic) {
  const VulkanDeviceInfo tiny = presets::with_shared_memory(presets::lavapipe(), 2048);
  try {
    plan_matmul_tile(tiny);
    FAIL() << "a 2 KiB device got a tile";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("16 x 16 x 16"), std::string::npos) << m;
    EXPECT_NE(m.find("2176 bytes per workgroup needed, 2048 bytes allowed"), std::string::npos) << m;
    EXPECT_NE(m.find("maxComputeSharedMemorySize"), std::string::npos) << m;
  }
}

TEST(ShaderTiles, AWorkgroupOverTheDevicesLimitIsRefused) {
  VulkanDeviceInfo d = presets::lavapipe();
  d.max_workgroup_invocations = 32;
  EXPECT_THROW(plan_matmul_tile(d), Error);
}

// rms_norm.comp and softmax.comp reduce through WG floats of shared memory.
TEST(ShaderTiles, ReductionTakesTheLargestWorkgroupThatFitsBothLimits) {
  EXPECT_EQ(reduction_shared_bytes(256), 1024u);
  for (const VulkanDeviceInfo& d : {presets::lavapipe(), presets::tesla_t4(), presets::nvidia_h100()}) {
    const ReductionPlan plan = plan_reduction(d);
    EXPECT_EQ(plan.workgroup, 256u) << d.name;
    EXPECT_EQ(plan.shared_bytes, 1024u);
  }
  EXPECT_EQ(plan_reduction(presets::with_shared_memory(presets::lavapipe(), 600)).workgroup, 128u);
  VulkanDeviceInfo narrow = presets::lavapipe();
  narrow.max_workgroup_invocations = 64;
  EXPECT_EQ(plan_reduction(narrow).workgroup, 64u);
}

TEST(ShaderTiles, ReductionWithoutRoomForThirtyTwoFloatsIsRefused) {
  try {
    plan_reduction(presets::with_shared_memory(presets::lavapipe(), 100));
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row-reduction"), std::string::npos) << e.what();
  }
  VulkanDeviceInfo tiny = presets::lavapipe();
  tiny.max_workgroup_invocations = 16;
  EXPECT_THROW(plan_reduction(tiny), Error);
}

}  // namespace g4::gpu
