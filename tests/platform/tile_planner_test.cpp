#include "platform/tile_planner.h"

#include <gtest/gtest.h>

#include "platform/device_presets.h"
#include "platform/error.h"

namespace g4 {
namespace {

constexpr uint64_t kKiB = 1024;

// f32 operands and accumulators: 64x64x64 needs exactly 48 KiB.
TileProblem f32_matmul() {
  return {"matmul-f32",
          {{16, 16, 64}, {64, 64, 64}, {32, 32, 64}, {32, 64, 64}},  // unordered on purpose
          [](const TileShape& t) { return gemm_tile_scratch_bytes(t, 4, 4, 4); }};
}

// bf16 operands, f32 accumulators, GPU-sized tiles: 176 KiB, 96 KiB, 56 KiB, 32 KiB.
TileProblem bf16_gpu_matmul() {
  return {"matmul-bf16-tc",
          {{128, 256, 64}, {128, 128, 64}, {64, 128, 64}, {64, 64, 64}},
          [](const TileShape& t) { return gemm_tile_scratch_bytes(t, 2, 2, 4); }};
}

}  // namespace

TEST(TilePlanner, PicksTheLargestTileThatFitsL1) {
  TilePlan plan = plan_tiles(f32_matmul(), cpu_l1d_limit(presets::sapphire_rapids()));  // 48 KiB
  EXPECT_EQ(plan.tile, (TileShape{64, 64, 64}));
  EXPECT_EQ(plan.scratch_bytes, 48 * kKiB);
  EXPECT_FALSE(plan.shrunk);
}

TEST(TilePlanner, SmallerL1ForcesASmallerTile) {
  TilePlan plan = plan_tiles(f32_matmul(), cpu_l1d_limit(presets::avx2_laptop()));  // 32 KiB
  EXPECT_EQ(plan.tile, (TileShape{32, 64, 64}));
  EXPECT_EQ(plan.scratch_bytes, 32 * kKiB);
  EXPECT_TRUE(plan.shrunk);
  DeviceInfo tiny = presets::with_caches(presets::avx2_laptop(), 12 * kKiB, 256 * kKiB);
  EXPECT_EQ(plan_tiles(f32_matmul(), cpu_l1d_limit(tiny)).tile, (TileShape{16, 16, 64}));  // 9 KiB
}

TEST(TilePlanner, RefusesWithTheArithmetic) {
  DeviceInfo tiny = presets::with_caches(presets::avx2_laptop(), 4 * kKiB, 64 * kKiB);
  try {
    plan_tiles(f32_matmul(), cpu_l1d_limit(tiny));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "matmul-f32: needs 9 KiB per tile for 16 x 16 x 64 (the smallest candidate), device allows 4 KiB "
                 "(L1d per core on AVX2 laptop (preset))");
  }
}

TEST(TilePlanner, GpuPresetsShrinkTilesToTheirSharedMemory) {
  EXPECT_EQ(plan_tiles(bf16_gpu_matmul(), gpu_smem_limit(presets::h100_sm90())).tile, (TileShape{128, 256, 64}));
  EXPECT_EQ(plan_tiles(bf16_gpu_matmul(), gpu_smem_limit(presets::l4_sm89())).tile, (TileShape{128, 128, 64}));
  TilePlan t4 = plan_tiles(bf16_gpu_matmul(), innermost_scratch_limit(presets::t4_sm75()));
  EXPECT_EQ(t4.tile, (TileShape{64, 128, 64}));
  EXPECT_EQ(describe_tile_plan(t4),
            "matmul-bf16-tc: tile 64 x 128 x 64 uses 56 KiB of 64 KiB (shared memory per block on sm_75 (Tesla "
            "T4)); larger candidates did not fit");
}

// The failure lesson 2 describes: an int4-dequant tile sized for a TPU scratchpad on a T4.
TEST(TilePlanner, RefusesATpuSizedTileOnTuring) {
  TileProblem tpu_sized{"matmul-q4-dequant",
                        {{256, 512, 256}},
                        [](const TileShape& t) {
                          // bf16 A, int4 B packed plus its bf16 dequantized copy, f32 C.
                          return uint64_t(t.m) * t.k * 2 + uint64_t(t.k) * t.n / 2 + uint64_t(t.k) * t.n * 2 +
                                 uint64_t(t.m) * t.n * 4;
                        }};
  try {
    plan_tiles(tpu_sized, gpu_smem_limit(presets::t4_sm75()));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("needs 960 KiB per tile for 256 x 512 x 256"), std::string::npos) << what;
    EXPECT_NE(what.find("device allows 64 KiB (shared memory per block on sm_75"), std::string::npos) << what;
  }
}

TEST(TilePlanner, RefusesUnknownLimitsAndEmptyCandidates) {
  EXPECT_THROW(plan_tiles(f32_matmul(), ScratchLimit{0, "L1d per core on a mystery CPU"}), Error);
  TileProblem none{"matmul-none", {}, [](const TileShape&) { return uint64_t(1); }};
  EXPECT_THROW(plan_tiles(none, ScratchLimit{1024, "x"}), Error);
  TileProblem bad{"matmul-bad", {{0, 4, 4}}, [](const TileShape&) { return uint64_t(1); }};
  EXPECT_THROW(plan_tiles(bad, ScratchLimit{1024, "x"}), Error);
}

TEST(TilePlanner, PlansOnThisMachine) {
  TilePlan plan = plan_tiles(f32_matmul(), innermost_scratch_limit(host_cpu()));
  EXPECT_LE(plan.scratch_bytes, host_cpu().caches.l1d_bytes);
}

TEST(TilePlanner, FormatKib) {
  EXPECT_EQ(format_kib(96 * kKiB), "96 KiB");
  EXPECT_EQ(format_kib(96 * kKiB + 512), "96.5 KiB");
}

}  // namespace g4
