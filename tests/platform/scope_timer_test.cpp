// ScopeTimer adds its scopes' wall time to a running total (and times nothing without one).
#include "platform/scope_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace g4 {
namespace {

TEST(ScopeTimer, AddsItsScopesWallTimeAndNothingWithoutATarget) {
  double total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ScopeTimer t(&total);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double first = total;
  EXPECT_GE(first, 0.005);
  {
    ScopeTimer t(&total);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double outside = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(total, first + 0.005);  // added to, not overwritten
  EXPECT_LE(total, outside);
  ScopeTimer none(nullptr);  // no target: nothing to write, nothing to crash
}

}  // namespace
}  // namespace g4
