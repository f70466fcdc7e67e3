// The FMA scaling probe: the verdict from given figures (a table that includes machines we do not
// have), the refusals, and a short real measurement's sanity (its speed is a benchmark figure,
// not a test).
#include "platform/fma_throughput.h"

#include <gtest/gtest.h>

#include <cmath>

#include "platform/device.h"
#include "platform/error.h"

namespace g4 {
namespace {

FmaScaling figures(int threads, double one, double all) {
  FmaScaling s;
  s.threads = threads;
  s.one_thread_gflops = one;
  s.all_threads_gflops = all;
  s.isa = "AVX-512";
  return s;
}

TEST(FmaScaling, VerdictFollowsTheMeasuredRatio) {
  struct Row {
    FmaScaling s;
    const char* must_say;
    const char* must_not_say;
  };
  const Row rows[] = {
      // The Ice Lake VM this project draws: two vCPUs, one core's FMA units.
      {figures(2, 165, 182), "share FMA units", "scale with"},
      // Two real cores.
      {figures(2, 165, 326), "scale with their number", "share"},
      // 16 threads on 8 SMT cores: 8.8 cores' worth.
      {figures(16, 100, 880), "share FMA units", "scale with"},
      // Exactly at the line (0.75 x threads) still scales.
      {figures(4, 100, 300), "scale with their number", "share"},
      // One thread: nothing to compare.
      {figures(1, 100, 100), "1.00x", "share"},
  };
  for (const Row& r : rows) {
    const std::string d = describe_fma_scaling(r.s);
    EXPECT_NE(d.find(r.must_say), std::string::npos) << d;
    EXPECT_EQ(d.find(r.must_not_say), std::string::npos) << d;
  }
  EXPECT_NEAR(fma_cores_worth(figures(2, 165, 182)), 1.103, 1e-3);
  EXPECT_NE(describe_fma_scaling(figures(2, 165, 182)).find("1.1 cores' worth"), std::string::npos);
  EXPECT_EQ(fma_cores_worth(FmaScaling{}), 0.0);  // not measured: no division by zero
}

TEST(FmaScaling, RefusesBadArguments) {
  EXPECT_THROW(measure_fma_scaling(0), Error);
  EXPECT_THROW(measure_fma_scaling(2, 0.0), Error);
  EXPECT_THROW(measure_fma_scaling(2, -1.0), Error);
  EXPECT_THROW(measure_fma_scaling(2, 11.0), Error);
  EXPECT_THROW(measure_fma_scaling(2, std::nan("")), Error);
}

TEST(FmaScaling, MeasuresSomethingPlausible) {
  const FmaScaling s = measure_fma_scaling(2, 0.01);
  EXPECT_EQ(s.threads, 2);
  EXPECT_GT(s.one_thread_gflops, 0.1);
  EXPECT_TRUE(std::isfinite(s.all_threads_gflops));
  // Two threads cannot do much more than twice one thread's work (timer noise aside).
  EXPECT_GT(fma_cores_worth(s), 0.0);
  EXPECT_LT(fma_cores_worth(s), 3.0);
  EXPECT_FALSE(std::string(s.isa).empty());
}

TEST(MacPeak, RefusesBadArgumentsAndUnconfirmedInstructions) {
  EXPECT_THROW(measure_mac_peak(MacUnit::F32Fma, 0), Error);
  EXPECT_THROW(measure_mac_peak(MacUnit::F32Fma, 1, 0.0), Error);
  EXPECT_THROW(measure_mac_peak(MacUnit::F32Fma, 1, 11.0), Error);
  if (!host_cpu().avx512_bf16_usable()) {
    EXPECT_THROW(measure_mac_peak(MacUnit::Bf16Dot, 1, 0.01), Error);
  }
  if (!host_cpu().avx512_vnni_usable()) {
    EXPECT_THROW(measure_mac_peak(MacUnit::Int8Dot, 1, 0.01), Error);
  }
  if (!host_cpu().avx_vnni_usable()) {
    EXPECT_THROW(measure_mac_peak(MacUnit::Int8Dot256, 1, 0.01), Error);
  }
  if (!host_cpu().avx2_int8_usable()) {
    EXPECT_THROW(measure_mac_peak(MacUnit::Int8Madd, 1, 0.01), Error);
  }
  if (!host_cpu().neon_dotprod_usable()) {
    EXPECT_THROW(measure_mac_peak(MacUnit::Int8Sdot, 1, 0.01), Error);
  }
  for (MacUnit tile : {MacUnit::Bf16Tile, MacUnit::Int8Tile}) {
    const bool confirmed = tile == MacUnit::Bf16Tile ? host_cpu().amx_bf16_usable() : host_cpu().amx_int8_usable();
    if (!confirmed) {
      EXPECT_THROW(measure_mac_peak(tile, 1, 0.01), Error) << mac_unit_name(tile);
    }
  }
  EXPECT_STREQ(mac_unit_name(MacUnit::Bf16Dot), "VDPBF16PS");
  EXPECT_STREQ(mac_unit_name(MacUnit::Int8Tile), "TDPBSUD");
  // Tile products in the kernels' shapes: 16 x 16 sums of 32 products (bf16 pairs x 16, or one
  // int8 block of 32), each a multiply and an add.
  EXPECT_EQ(mac_unit_operations(MacUnit::Bf16Tile), 16 * 16 * 32 * 2);
  EXPECT_EQ(mac_unit_operations(MacUnit::Int8Tile), 16 * 16 * 32 * 2);
}

// Each instruction counted at its operations: VDPBF16PS does 64 (twice an AVX-512 FMA's 32),
// VPDPBUSD 128. The bf16 instruction issues at a quarter to the full rate of FMAs, so on one
// thread its peak is above 0.35x the FMA peak (Zen 5: 1.85x; an AMX Xeon: 0.50x, 1.4 times the
// bound); counted as an FMA it would read 0.25x there. VPDPBUSD issues at least at half the FMA
// rate: at least the FMA peak (Zen 5: 4.0x measured).
TEST(MacPeak, CountsEachInstructionsOperations) {
  const double fma = measure_mac_peak(MacUnit::F32Fma, 1, 0.02).gops;
  EXPECT_GT(fma, 0.1);
  if (host_cpu().avx512_bf16_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Bf16Dot, 1, 0.02).gops, 0.35 * fma);
  }
  if (host_cpu().avx512_vnni_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Int8Dot, 1, 0.02).gops, 1.0 * fma);
  }
  // The 256-bit int8 steps: 32 products in two instructions (AVX2) or one (AVX-VNNI), each at
  // least at half an AVX2 FMA's rate (16 operations): above half the f32 peak.
  if (host_cpu().avx2_int8_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Int8Madd, 1, 0.02).gops, 0.5 * fma);
  }
  if (host_cpu().avx_vnni_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Int8Dot256, 1, 0.02).gops, 0.5 * fma);
  }
  // A tile product is 16 x 16 x 32 multiply-adds: far above the FMA peak wherever AMX runs.
  if (host_cpu().amx_bf16_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Bf16Tile, 1, 0.02).gops, 1.0 * fma);
  }
  if (host_cpu().amx_int8_usable()) {
    EXPECT_GT(measure_mac_peak(MacUnit::Int8Tile, 1, 0.02).gops, 1.0 * fma);
  }
}

}  // namespace
}  // namespace g4
