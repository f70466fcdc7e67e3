// The int8 attention kernel (VPDPBUSD) against a double-precision evaluation of the same
// operands: the query rows quantized with the cache's rule (quantize_int8_symmetric), int8 keys
// and values with their scales, scores, softmax and Σ p·v / Σ p in double. The kernel's integer
// sums are exact, so what remains is f32 rounding (scale products, exp, the f32 sums over
// positions): we require 1e-4 with values in [-1, 1] and print the measured worst. Then the cost
// of rounding the queries, against the f32 kernel on the same cache (which keeps f32 queries),
// measured against what the cache's own int8 rounding already costs; that the result does not
// depend on how positions are cut into spans (bit for bit); that split ranges merge to the whole;
// and what it refuses.
#include "ops/attention/attention_int8.h"

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
#include "platform/quantize_int8.h"

namespace g4 {
namespace attention_int8_test {  // named: the unity build puts this file beside attention_bf16_test.cpp
namespace {

using ops::KvElem;

constexpr double kInt8Tol = 1e-4;

struct Int8Case {
  int64_t G, kvh, hd, n;
};

struct Data {
  std::vector<float> q;            // [G, hd] f32 (the kernel quantizes it)
  std::vector<float> kf, vf;       // [n, kvh, hd] before the cache's rounding
  std::vector<int8_t> k, v;        // [n, kvh, hd] as an int8 cache stores them
  std::vector<float> ks, vs;       // [n, kvh]
};

Data make(const Int8Case& c, std::mt19937& rng, float score_scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Data d;
  d.q.resize(size_t(c.G * c.hd));
  for (float& x : d.q) x = u(rng) * score_scale;
  d.kf.resize(size_t(c.n * c.kvh * c.hd));
  d.vf.resize(d.kf.size());
  for (float& x : d.kf) x = u(rng);
  for (float& x : d.vf) x = u(rng);
  d.k.resize(d.kf.size());
  d.v.resize(d.kf.size());
  d.ks.resize(size_t(c.n * c.kvh));
  d.vs.resize(d.ks.size());
  for (size_t r = 0; r < d.ks.size(); ++r) {
    d.ks[r] = quantize_int8_symmetric(&d.kf[r * size_t(c.hd)], c.hd, &d.k[r * size_t(c.hd)]);
    d.vs[r] = quantize_int8_symmetric(&d.vf[r * size_t(c.hd)], c.hd, &d.v[r * size_t(c.hd)]);
  }
  return d;
}

// What the double-precision truth multiplies.
struct TruthOptions {
  bool quantized_q = false;  // the query rows as the int8 kernel sees them; otherwise as given (the f32 kernel's)
  bool cached_kv = true;     // keys and values as the cache holds them; otherwise before its rounding
};

// out [G, hd] over positions [begin, end) of kv head kh, in double.
std::vector<double> truth(const Int8Case& c, const Data& d, int64_t kh, int64_t begin, int64_t end, TruthOptions o) {
  const bool quantized_q = o.quantized_q, cached_kv = o.cached_kv;
  std::vector<double> out(size_t(c.G * c.hd), 0.0);
  std::vector<int8_t> q8(size_t(c.hd));
  for (int64_t g = 0; g < c.G; ++g) {
    std::vector<double> qd(size_t(c.hd));
    const float qscale = quantize_int8_symmetric(&d.q[size_t(g * c.hd)], c.hd, q8.data());
    for (int64_t i = 0; i < c.hd; ++i)
      qd[size_t(i)] = quantized_q ? double(qscale) * q8[size_t(i)] : double(d.q[size_t(g * c.hd + i)]);
    auto key = [&](int64_t p, int64_t i) {
      const size_t r = size_t(p * c.kvh + kh);
      return cached_kv ? double(d.ks[r]) * d.k[r * size_t(c.hd) + size_t(i)] : double(d.kf[r * size_t(c.hd) + size_t(i)]);
    };
    auto value = [&](int64_t p, int64_t i) {
      const size_t r = size_t(p * c.kvh + kh);
      return cached_kv ? double(d.vs[r]) * d.v[r * size_t(c.hd) + size_t(i)] : double(d.vf[r * size_t(c.hd) + size_t(i)]);
    };
    std::vector<double> s;
    for (int64_t p = begin; p < end; ++p) {
      double acc = 0;
      for (int64_t i = 0; i < c.hd; ++i) acc += qd[size_t(i)] * key(p, i);
      s.push_back(acc);
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t p = begin; p < end; ++p)
      for (int64_t i = 0; i < c.hd; ++i) out[size_t(g * c.hd + i)] += s[size_t(p - begin)] / sum * value(p, i);
  }
  return out;
}

// Spans over [0, n) with the given lengths (the last one takes the rest).
std::vector<ops::KvSpan> cut(const Int8Case& c, const Data& d, const std::vector<int64_t>& lengths) {
  std::vector<ops::KvSpan> spans;
  int64_t at = 0;
  for (size_t i = 0; at < c.n; ++i) {
    const int64_t len = i < lengths.size() ? std::min(lengths[i], c.n - at) : c.n - at;
    const size_t off = size_t(at * c.kvh * c.hd), soff = size_t(at * c.kvh);
    spans.push_back({KvElem::I8, len, d.k.data() + off, d.v.data() + off, d.ks.data() + soff, d.vs.data() + soff});
    at += len;
  }
  return spans;
}

using Result = test::AttentionState;

struct RunOptions {
  bool f32_kernel = false;  // the f32 kernel (ops::attend_partial) instead of the int8 one
};

Result run(const Int8Case& c, const Data& d, const std::vector<ops::KvSpan>& spans, int64_t kh, int64_t begin,
           int64_t end, RunOptions o = {}) {
  const bool f32_kernel = o.f32_kernel;
  Result r{std::vector<float>(size_t(c.G * c.hd)), std::vector<float>(size_t(c.G)), std::vector<float>(size_t(c.G))};
  const ops::KvSpans ks{spans.data(), spans.size(), c.kvh, c.hd};
  if (f32_kernel)
    ops::attend_partial(d.q.data(), c.G, ks, kh, begin, end, r.o.data(), r.m.data(), r.l.data());
  else
    ops::attend_partial_int8(d.q.data(), c.G, ks, kh, begin, end, r.o.data(), r.m.data(), r.l.data());
  return r;
}

std::vector<float> finish(const Int8Case& c, const Result& r) {
  std::vector<float> out(r.o.size());
  ops::attend_finish(c.G, c.hd, r.o.data(), r.l.data(), out.data());
  return out;
}

double worst_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::fabs(double(a[i]) - b[i]));
  return w;
}

#define REQUIRE_INT8()                               \
  if (!ops::attention_int8_available()) GTEST_SKIP() << "no confirmed AVX512_VNNI on this CPU"

TEST(AttentionInt8, MatchesDoublePrecisionOnTheSameQuantizedOperands) {
  REQUIRE_INT8();
  std::mt19937 rng(11);
  // Head dims below, at and above one 64-byte step and with tails (and 32-column strips with
  // and without a tail); groups of every block size (8, 4, 2, 1) and mixtures; tiles that are
  // odd, short, exactly full and spill over.
  const Int8Case cases[] = {{8, 1, 256, 300}, {8, 1, 512, 129}, {1, 1, 16, 1},   {3, 2, 40, 17},  {5, 1, 64, 128},
                            {2, 4, 96, 3},    {13, 1, 48, 257}, {4, 2, 256, 2}, {6, 1, 33, 77}, {8, 1, 512, 4096},
                            {9, 1, 7, 40},    {8, 1, 1040, 50}};
  for (const Int8Case& c : cases)
    for (float scale : {1.0f, 6.0f}) {  // soft and peaked softmax
      const Data d = make(c, rng, scale);
      const auto spans = cut(c, d, {});
      double worst = 0;
      for (int64_t kh = 0; kh < c.kvh; ++kh)
        worst = std::max(
            worst, worst_diff(finish(c, run(c, d, spans, kh, 0, c.n)), truth(c, d, kh, 0, c.n, {.quantized_q = true})));
      std::printf("[ attn int8 ] G %lld kvh %lld hd %lld n %lld scale %.0f: worst |delta| %.2e\n", (long long)c.G,
                  (long long)c.kvh, (long long)c.hd, (long long)c.n, double(scale), worst);
      EXPECT_LE(worst, kInt8Tol) << "G " << c.G << " hd " << c.hd << " n " << c.n;
    }
}

// What rounding the queries costs: the int8 kernel and the f32 kernel (f32 queries) on the same
// int8 cache, each against the double-precision attention over the keys and values before the
// cache rounded them. The queries are rounded by the same rule as the keys, so their rounding
// adds an error of about the same size as the cache's own, independent of it: we require the
// int8 kernel's mean error to stay within 2x the f32 kernel's (independent errors of equal size
// add to about 1.4x), and print both with the worst element's.
TEST(AttentionInt8, QueryRoundingCostsAboutAsMuchAsTheCachesOwn) {
  REQUIRE_INT8();
  std::mt19937 rng(21);
  auto mean_diff = [](const std::vector<float>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(double(a[i]) - b[i]);
    return s / double(a.size());
  };
  for (const Int8Case& c : {Int8Case{8, 1, 256, 512}, Int8Case{8, 1, 512, 1000}})
    for (float scale : {0.5f, 2.0f}) {
      const Data d = make(c, rng, scale);
      const auto spans = cut(c, d, {});
      const auto exact = truth(c, d, 0, 0, c.n, {.quantized_q = false, .cached_kv = false});
      const auto int8 = finish(c, run(c, d, spans, 0, 0, c.n)),
                 f32 = finish(c, run(c, d, spans, 0, 0, c.n, {.f32_kernel = true}));
      const double mean_int8 = mean_diff(int8, exact), mean_f32 = mean_diff(f32, exact);
      std::printf("[ attn int8 ] hd %lld n %lld scale %.1f: |delta| vs unrounded K/V: f32 kernel mean %.2e (worst %.2e), "
                  "int8 kernel mean %.2e (worst %.2e)\n",
                  (long long)c.hd, (long long)c.n, double(scale), mean_f32, worst_diff(f32, exact), mean_int8,
                  worst_diff(int8, exact));
      EXPECT_GT(mean_f32, 0.0);
      EXPECT_LE(mean_int8, 2.0 * mean_f32) << "hd " << c.hd << " scale " << scale;
    }
}

// The same positions cut into spans of 1, odd and random lengths, and sub-ranges starting at
// any position: o, m and l are bit-identical.
TEST(AttentionInt8, SpansChangeNoBit) {
  REQUIRE_INT8();
  std::mt19937 rng(5);
  const Int8Case c{8, 2, 80, 331};
  const Data d = make(c, rng, 3.0f);
  test::expect_spans_change_no_bit(c.n, c.kvh, rng, [&](const std::vector<int64_t>& lengths, int64_t kh, int64_t b,
                                                       int64_t e) { return run(c, d, cut(c, d, lengths), kh, b, e); });
}

// A range split at arbitrary points and merged with attend_merge_finish equals the whole range to f32
// rounding, both within the double-precision bound.
TEST(AttentionInt8, SplitRangesMergeToTheWhole) {
  REQUIRE_INT8();
  std::mt19937 rng(8);
  const Int8Case c{8, 1, 256, 700};
  const Data d = make(c, rng, 0.5f);
  const auto spans = cut(c, d, {64, 64, 64, 64, 64, 64, 64, 64, 64, 64});
  const auto want = truth(c, d, 0, 0, c.n, {.quantized_q = true});
  std::vector<Result> parts;
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 256}, {256, 301}, {301, 512}, {512, 700}})
    parts.push_back(run(c, d, spans, 0, b, e));
  const auto merged = test::merge_states(parts), whole = finish(c, run(c, d, spans, 0, 0, c.n));
  std::printf("[ attn int8 ] 700 keys: whole worst %.2e, split in 4 and merged %.2e\n", worst_diff(whole, want),
              worst_diff(merged, want));
  EXPECT_LE(worst_diff(merged, want), kInt8Tol);
  EXPECT_LE(worst_diff(whole, want), kInt8Tol);
}

TEST(AttentionInt8, RefusesOtherElementTypesBadRangesAndWideHeads) {
  REQUIRE_INT8();
  std::vector<float> kf(64), vf(64), q(2048), o(2048), m(1), l(1), sc(4);
  std::vector<int8_t> k8(4096), v8(4096);
  const ops::KvSpan spans[] = {{KvElem::I8, 2, k8.data(), v8.data(), sc.data(), sc.data()},
                               {KvElem::F32, 2, kf.data(), vf.data(), nullptr, nullptr}};
  try {
    ops::attend_partial_int8(q.data(), 1, ops::KvSpans{spans, 2, 1, 16}, 0, 0, 4, o.data(), m.data(), l.data());
    ADD_FAILURE() << "an f32 span was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("span 1"), std::string::npos) << e.what();
  }
  const ops::KvSpans two{spans, 1, 1, 16};
  EXPECT_THROW(ops::attend_partial_int8(q.data(), 1, two, 0, 0, 3, o.data(), m.data(), l.data()), Error);  // 2 keys
  EXPECT_THROW(ops::attend_partial_int8(q.data(), 1, two, 0, 1, 1, o.data(), m.data(), l.data()), Error);  // empty
  EXPECT_THROW(ops::attend_partial_int8(q.data(), 1, two, 1, 0, 2, o.data(), m.data(), l.data()), Error);  // kv head
  try {  // sums past 2^24 would round in f32
    ops::attend_partial_int8(q.data(), 1, ops::KvSpans{spans, 1, 1, 2048}, 0, 0, 2, o.data(), m.data(), l.data());
    ADD_FAILURE() << "head dim 2048 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1040"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attention_int8_test
}  // namespace g4
