#include "platform/scope_timer.h"

#include <chrono>

namespace g4 {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ScopeTimer::ScopeTimer(double* into) : into_(into) {
  if (into_) start_ns_ = steady_ns();
}

ScopeTimer::~ScopeTimer() {
  if (into_) *into_ += double(steady_ns() - start_ns_) * 1e-9;
}

}  // namespace g4
