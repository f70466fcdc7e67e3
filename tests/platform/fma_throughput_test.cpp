// The FMA scaling probe: the verdict from given figures (a table that includes machines we do not
// have), the refusals, and a short real measurement's sanity (its speed is a benchmark figure,
// not a test).
#include "platform/fma_throughput.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace g4
