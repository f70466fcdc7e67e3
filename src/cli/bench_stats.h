// Small figures g4 bench derives from its runs and from the process: medians and run ranges,
// resident memory, and what one token of the model reads and computes.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace g4::cli {

using BenchClock = std::chrono::steady_clock;
inline double seconds_since(BenchClock::time_point t) {
  return std::chrono::duration<double>(BenchClock::now() - t).count();
}

// The middle element (the upper of the middle two for an even count); 0 when empty.
double median(std::vector<double> v);

// The median (as median()), the quartiles (elements n/4 and 3n/4 of the sorted values) and the
// extremes: the spread of many short pairs, where a range alone shows only the two worst.
struct Spread {
  double median = 0, q1 = 0, q3 = 0, lo = 0, hi = 0;
};
Spread spread_of(std::vector<double> v);

// "lo-hi" of a set of runs: on a shared machine the spread a median hides is part of the figure.
std::string run_range(const std::vector<double>& v, int digits);

// The process's resident high-water mark: it also counts what only the bench holds (the 1 GiB
// bandwidth buffer, measured while the model is loaded) and what the load held for a moment.
uint64_t rss_high_water_bytes();

// Resident bytes now (/proc/self/statm), 0 when unreadable.
uint64_t rss_now_bytes();

// Bytes of weights one decoded token reads: every matrix once, the tied head in full, one row of
// each embedding table (a gather), and only the top-k experts' share of the expert tensors.
uint64_t weight_bytes_per_token(const Model& m);

// Multiply-adds of the weight products per prompt token in a prefill of prompt_len tokens:
// every streamed matrix once (the top-k experts' share of the expert tensors), the head once per
// prompt (only the last token's logits are computed). Attention is not counted.
double prefill_macs_per_token(Model& m, int64_t prompt_len);

}  // namespace g4::cli
