// ScopeTimer: adds the wall time (steady clock) of its scope to a running total in seconds.
#pragma once
#include <cstdint>

namespace g4 {

class ScopeTimer {
 public:
  explicit ScopeTimer(double* into);  // into == nullptr: times nothing
  ~ScopeTimer();
  ScopeTimer(const ScopeTimer&) = delete;
  ScopeTimer& operator=(const ScopeTimer&) = delete;

 private:
  double* into_;
  int64_t start_ns_ = 0;
};

}  // namespace g4
