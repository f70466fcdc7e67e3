// The bf16 attention kernel (VDPBF16PS) against a double-precision evaluation of the same
// operands: queries rounded to bf16 (ties to even), bf16 keys and values, scores and softmax
// and Σ p·v / Σ p in double. What the kernel adds is f32 summation and rounding each softmax
// weight to bf16 (relative error <= 2^-9), so with values in [-1, 1] its output may differ by at
// most about 2^-8 (weights rounded up on one side, down on the other); we require 2^-8 and print
// the measured worst. Also: the result does not depend on how positions are cut into spans
// (bit for bit), split ranges merge to the whole, and what it refuses.
#include "ops/attention_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ops/attention_span_checks.h"
#include "platform/dtype.h"
#include "platform/error.h"

namespace g4 {
namespace {

using ops::KvElem;

constexpr double kBf16Tol = 1.0 / 256;

struct Bf16Case {
  int64_t G, kvh, hd, n;
};

struct Data {
  std::vector<float> q;          // [G, hd] f32 (the kernel rounds it)
  std::vector<uint16_t> k, v;    // [n, kvh, hd] bf16
};

Data make(const Bf16Case& c, std::mt19937& rng, float score_scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Data d;
  d.q.resize(size_t(c.G * c.hd));
  for (float& x : d.q) x = u(rng) * score_scale;
  d.k.resize(size_t(c.n * c.kvh * c.hd));
  d.v.resize(d.k.size());
  for (auto& x : d.k) x = f32_to_bf16(u(rng));
  for (auto& x : d.v) x = f32_to_bf16(u(rng));
  return d;
}

// out [G, hd] over positions [begin, end) of kv head kh, in double on the rounded operands.
std::vector<double> truth(const Bf16Case& c, const Data& d, int64_t kh, int64_t begin, int64_t end) {
  std::vector<double> out(size_t(c.G * c.hd), 0.0);
  for (int64_t g = 0; g < c.G; ++g) {
    std::vector<double> s;
    for (int64_t p = begin; p < end; ++p) {
      double acc = 0;
      for (int64_t i = 0; i < c.hd; ++i)
        acc += double(round_to_bf16(d.q[size_t(g * c.hd + i)])) *
               double(bf16_to_f32(d.k[size_t((p * c.kvh + kh) * c.hd + i)]));
      s.push_back(acc);
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t p = begin; p < end; ++p)
      for (int64_t i = 0; i < c.hd; ++i)
        out[size_t(g * c.hd + i)] += s[size_t(p - begin)] / sum * double(bf16_to_f32(d.v[size_t((p * c.kvh + kh) * c.hd + i)]));
  }
  return out;
}

// Spans over [0, n) with the given lengths (the last one takes the rest).
std::vector<ops::KvSpan> cut(const Bf16Case& c, const Data& d, const std::vector<int64_t>& lengths) {
  std::vector<ops::KvSpan> spans;
  int64_t at = 0;
  for (size_t i = 0; at < c.n; ++i) {
    const int64_t len = i < lengths.size() ? std::min(lengths[i], c.n - at) : c.n - at;
    const size_t off = size_t(at * c.kvh * c.hd);
    spans.push_back({KvElem::BF16, len, d.k.data() + off, d.v.data() + off, nullptr, nullptr});
    at += len;
  }
  return spans;
}

using Result = test::AttentionState;

Result run(const Bf16Case& c, const Data& d, const std::vector<ops::KvSpan>& spans, int64_t kh, int64_t begin, int64_t end) {
  Result r{std::vector<float>(size_t(c.G * c.hd)), std::vector<float>(size_t(c.G)), std::vector<float>(size_t(c.G))};
  const ops::KvSpans ks{spans.data(), spans.size(), c.kvh, c.hd};
  ops::attend_partial_bf16(d.q.data(), c.G, ks, kh, begin, end, r.o.data(), r.m.data(), r.l.data());
  return r;
}

std::vector<float> finish(const Bf16Case& c, const Result& r) {
  std::vector<float> out(r.o.size());
  ops::attend_finish(c.G, c.hd, r.o.data(), r.l.data(), out.data());
  return out;
}

#define REQUIRE_BF16()                               \
  if (!ops::attention_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU"

TEST(AttentionBf16, MatchesDoublePrecisionOnTheSameRoundedOperands) {
  REQUIRE_BF16();
  std::mt19937 rng(11);
  // Head dims below, at and above one 32-element step and with tails; groups of every block
  // size (8, 4, 2, 1) and mixtures; tiles that are odd, short, exactly full and spill over.
  const Bf16Case cases[] = {{8, 1, 256, 300}, {8, 1, 512, 129}, {1, 1, 16, 1}, {3, 2, 40, 17}, {5, 1, 64, 128},
                        {2, 4, 96, 3},    {13, 1, 48, 257}, {4, 2, 256, 2}, {6, 1, 33, 77}, {8, 1, 512, 4096}};
  for (const Bf16Case& c : cases)
    for (float scale : {1.0f, 6.0f}) {  // soft and peaked softmax (scores up to about ±hd·scale/3)
      const Data d = make(c, rng, scale);
      const auto spans = cut(c, d, {});
      double worst = 0;
      for (int64_t kh = 0; kh < c.kvh; ++kh) {
        const auto out = finish(c, run(c, d, spans, kh, 0, c.n));
        const auto want = truth(c, d, kh, 0, c.n);
        for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(double(out[i]) - want[i]));
      }
      std::printf("[ attn bf16 ] G %lld kvh %lld hd %lld n %lld scale %.0f: worst |delta| %.2e\n", (long long)c.G,
                  (long long)c.kvh, (long long)c.hd, (long long)c.n, double(scale), worst);
      EXPECT_LE(worst, kBf16Tol) << "G " << c.G << " hd " << c.hd << " n " << c.n;
    }
}

// The same positions cut into spans of 1, odd and random lengths, and sub-ranges starting at
// any position: o, m and l are bit-identical.
TEST(AttentionBf16, SpansChangeNoBit) {
  REQUIRE_BF16();
  std::mt19937 rng(5);
  const Bf16Case c{8, 2, 80, 331};
  const Data d = make(c, rng, 3.0f);
  test::expect_spans_change_no_bit(c.n, c.kvh, rng, [&](const std::vector<int64_t>& lengths, int64_t kh, int64_t b,
                                                       int64_t e) { return run(c, d, cut(c, d, lengths), kh, b, e); });
}

// A range split at arbitrary points and merged with attend_merge_finish holds the same
// double-precision bound as the whole range. (Not closer than that: each range rounds its
// weights to bf16 relative to its own running maximum, so a split moves them by bf16 ulps.)
TEST(AttentionBf16, SplitRangesMergeToTheWhole) {
  REQUIRE_BF16();
  std::mt19937 rng(8);
  const Bf16Case c{8, 1, 256, 700};
  const Data d = make(c, rng, 0.5f);
  const auto spans = cut(c, d, {64, 64, 64, 64, 64, 64, 64, 64, 64, 64});
  const auto want = truth(c, d, 0, 0, c.n);
  std::vector<Result> parts;
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 256}, {256, 301}, {301, 512}, {512, 700}})
    parts.push_back(run(c, d, spans, 0, b, e));
  const auto merged = test::merge_states(parts), whole = finish(c, run(c, d, spans, 0, 0, c.n));
  double worst_merged = 0, worst_whole = 0;
  for (size_t i = 0; i < merged.size(); ++i) {
    worst_merged = std::max(worst_merged, std::fabs(double(merged[i]) - want[i]));
    worst_whole = std::max(worst_whole, std::fabs(double(whole[i]) - want[i]));
  }
  std::printf("[ attn bf16 ] 700 keys: whole worst %.2e, split in 4 and merged %.2e\n", worst_whole, worst_merged);
  EXPECT_LE(worst_merged, kBf16Tol);
  EXPECT_LE(worst_whole, kBf16Tol);
}

TEST(AttentionBf16, RefusesOtherElementTypesAndBadRanges) {
  REQUIRE_BF16();
  std::vector<float> kf(64), vf(64), q(16), o(16), m(1), l(1);
  std::vector<uint16_t> kb(64), vb(64);
  const ops::KvSpan spans[] = {{KvElem::BF16, 2, kb.data(), vb.data(), nullptr, nullptr},
                               {KvElem::F32, 2, kf.data(), vf.data(), nullptr, nullptr}};
  try {
    ops::attend_partial_bf16(q.data(), 1, ops::KvSpans{spans, 2, 1, 16}, 0, 0, 4, o.data(), m.data(), l.data());
    ADD_FAILURE() << "an f32 span was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("span 1"), std::string::npos) << e.what();
  }
  const ops::KvSpans two{spans, 1, 1, 16};
  EXPECT_THROW(ops::attend_partial_bf16(q.data(), 1, two, 0, 0, 3, o.data(), m.data(), l.data()), Error);  // 2 keys
  EXPECT_THROW(ops::attend_partial_bf16(q.data(), 1, two, 0, 1, 1, o.data(), m.data(), l.data()), Error);  // empty
  EXPECT_THROW(ops::attend_partial_bf16(q.data(), 1, two, 1, 0, 2, o.data(), m.data(), l.data()), Error);  // kv head
}

}  // namespace
}  // namespace g4
