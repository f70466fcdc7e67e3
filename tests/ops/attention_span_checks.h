// Checks every attention kernel's tests share: the result may depend only on the keys and
// values of [begin, end), never on how a cache or a batch cut them into spans; and partial
// states merge (ops::attend_merge_finish) as the forward pass merges its slices.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "ops/attention/attention_kernels.h"

namespace g4::test {

// One attend_partial* state: o [G, hd], m [G], l [G].
struct AttentionState {
  std::vector<float> o, m, l;
};

// The kernel over positions [begin, end) of kv head kh, the n positions cut into spans of the
// given lengths (the last span takes the rest; {} = one span).
using RunOnSpans =
    std::function<AttentionState(const std::vector<int64_t>& lengths, int64_t kh, int64_t begin, int64_t end)>;

// Spans of 1, of odd lengths and of random lengths (drawn from rng), and sub-ranges that start
// anywhere, tile boundaries included: o, m and l bit-identical to one span. n >= 300.
inline void expect_spans_change_no_bit(int64_t n, int64_t kvh, std::mt19937& rng, const RunOnSpans& run) {
  std::vector<int64_t> ones(static_cast<size_t>(n), 1), odd, random;
  for (int64_t i = 0; i < 60; ++i) odd.push_back(2 * (i % 5) + 1);
  std::uniform_int_distribution<int64_t> len(1, 70);
  for (int64_t i = 0; i < 40; ++i) random.push_back(len(rng));
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, n}, {1, n - 1}, {77, 205}, {128, 129}, {n - 31, n}})
    for (int64_t kh = 0; kh < kvh; ++kh) {
      const AttentionState ref = run({}, kh, b, e);
      for (const auto* lengths : {&ones, &odd, &random}) {
        const AttentionState got = run(*lengths, kh, b, e);
        EXPECT_EQ(0, std::memcmp(ref.o.data(), got.o.data(), ref.o.size() * 4)) << "[" << b << ", " << e << ")";
        EXPECT_EQ(0, std::memcmp(ref.m.data(), got.m.data(), ref.m.size() * 4));
        EXPECT_EQ(0, std::memcmp(ref.l.data(), got.l.data(), ref.l.size() * 4));
      }
    }
}

// The states of disjoint ranges, in the given order, laid out back to back as the forward pass
// keeps its slices (o, m, l; stride G · (hd + 2)) and merged: out [G, hd].
inline std::vector<float> merge_states(const std::vector<AttentionState>& parts) {
  const size_t G = parts.at(0).m.size(), hd = parts[0].o.size() / G, stride = G * (hd + 2);
  std::vector<float> states(parts.size() * stride), out(G * hd);
  for (size_t j = 0; j < parts.size(); ++j) {
    std::copy(parts[j].o.begin(), parts[j].o.end(), states.begin() + ptrdiff_t(j * stride));
    std::copy(parts[j].m.begin(), parts[j].m.end(), states.begin() + ptrdiff_t(j * stride + G * hd));
    std::copy(parts[j].l.begin(), parts[j].l.end(), states.begin() + ptrdiff_t(j * stride + G * hd + G));
  }
  ops::attend_merge_finish(int64_t(G), int64_t(hd), states.data(), stride, int64_t(parts.size()), out.data());
  return out;
}

}  // namespace g4::test
