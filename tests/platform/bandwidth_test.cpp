#include "platform/bandwidth.h"

#include <gtest/gtest.h>

#include "platform/error.h"

namespace g4 {

// Small buffer: this only checks the arithmetic and threading; `g4 device --bandwidth` measures.
TEST(Bandwidth, SmallBufferGivesAPositiveRate) {
  for (int threads : {1, 2}) {
    BandwidthResult r = measure_read_bandwidth({threads, 16u << 20, 2});
    EXPECT_GT(r.best_gb_per_s, 0.1) << threads;
    EXPECT_LT(r.best_gb_per_s, 1e5) << threads;  // a timing bug shows up as an absurd rate
    EXPECT_EQ(r.threads, threads);
    EXPECT_LE(r.buffer_bytes, 16u << 20);
    EXPECT_GT(r.buffer_bytes, 15u << 20);
  }
}

TEST(Bandwidth, RefusesZeroThreads) {
  try {
    measure_read_bandwidth({0, 1u << 20, 1});
    FAIL() << "expected g4::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  }
}

}  // namespace g4
