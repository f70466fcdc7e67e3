// The bf16 attention kernel (VDPBF16PS) against a double-precision evaluation of the same
// operands: queries rounded to bf16 (ties to even), bf16 keys and values, scores and softmax
// and Σ p·v / Σ p in double. What the kernel adds is f32 summation and rounding each softmax
// weight to bf16 (relative error <= 2^-9), so with values in [-1, 1] its output may differ by at
// most about 2^-8 (weights rounded up on one side, down on the other); we require 2^-8 and print
// the measured worst. Also: the result does not depend on how positions are cut into spans
// (bit for bit), split ranges merge to the whole, and what it refuses. The same for the kernel on
// AMX-BF16 tiles (attention_bf16_tiles.h), on the CPU's tiles where its check passed and on the
// software model of them everywhere: it sums in another order, within the same bound.
#include "ops/attention/attention_bf16.h"
#include "ops/amx/attention_bf16_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ops/attention_span_checks.h"
#include "ops/matmul/matmul.h"
#include "ops/matmul_context_options.h"
#include "platform/device_presets.h"
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

// On the VDPBF16PS kernel (unit None) or on tiles.
Result run(const Bf16Case& c, const Data& d, const std::vector<ops::KvSpan>& spans, int64_t kh, int64_t begin, int64_t end,
           ops::Bf16Tiles unit = ops::Bf16Tiles::None) {
  Result r{std::vector<float>(size_t(c.G * c.hd)), std::vector<float>(size_t(c.G)), std::vector<float>(size_t(c.G))};
  const ops::KvSpans ks{spans.data(), spans.size(), c.kvh, c.hd};
  if (unit == ops::Bf16Tiles::None)
    ops::attend_partial_bf16(d.q.data(), c.G, ks, kh, begin, end, r.o.data(), r.m.data(), r.l.data());
  else
    ops::attend_partial_bf16_tiles(unit, d.q.data(), c.G, ks, kh, begin, end, r.o.data(), r.m.data(), r.l.data());
  return r;
}

std::vector<float> finish(const Bf16Case& c, const Result& r) {
  std::vector<float> out(r.o.size());
  ops::attend_finish(c.G, c.hd, r.o.data(), r.l.data(), out.data());
  return out;
}

// The CPU's tiles where this kernel's check passed, else the software model of them.
ops::Bf16Tiles attention_tile_unit() {
  return ops::amx_attention_kernel_usable() ? ops::Bf16Tiles::Amx : ops::Bf16Tiles::Emulated;
}

// worst |out - truth| over every kv head of the case, on `unit`.
double worst_against_truth(const Bf16Case& c, const Data& d, ops::Bf16Tiles unit) {
  const auto spans = cut(c, d, {});
  double worst = 0;
  for (int64_t kh = 0; kh < c.kvh; ++kh) {
    const auto out = finish(c, run(c, d, spans, kh, 0, c.n, unit));
    const auto want = truth(c, d, kh, 0, c.n);
    for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(double(out[i]) - want[i]));
  }
  return worst;
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
      const double worst = worst_against_truth(c, d, ops::Bf16Tiles::None);
      std::printf("[ attn bf16 ] G %lld kvh %lld hd %lld n %lld scale %.0f: worst |delta| %.2e\n", (long long)c.G,
                  (long long)c.kvh, (long long)c.hd, (long long)c.n, double(scale), worst);
      EXPECT_LE(worst, kBf16Tol) << "G " << c.G << " hd " << c.hd << " n " << c.n;
    }
}

// The same positions cut into spans of 1, odd and random lengths, and sub-ranges starting at
// any position: o, m and l are bit-identical.
// On tiles (head dim 64) too: keys loaded straight from the cache and keys staged across span
// edges give the same bits.
TEST(AttentionBf16, SpansChangeNoBit) {
  REQUIRE_BF16();
  for (const auto unit : {ops::Bf16Tiles::None, attention_tile_unit()}) {
    SCOPED_TRACE(ops::bf16_tiles_name(unit));
    std::mt19937 rng(5);
    const Bf16Case c{8, 2, unit == ops::Bf16Tiles::None ? 80 : 64, 331};
    const Data d = make(c, rng, 3.0f);
    test::expect_spans_change_no_bit(c.n, c.kvh, rng, [&](const std::vector<int64_t>& lengths, int64_t kh, int64_t b,
                                                         int64_t e) { return run(c, d, cut(c, d, lengths), kh, b, e, unit); });
  }
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
  for (const auto unit : {ops::Bf16Tiles::None, attention_tile_unit()}) {
    std::vector<Result> parts;
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 256}, {256, 301}, {301, 512}, {512, 700}})
      parts.push_back(run(c, d, spans, 0, b, e, unit));
    const auto merged = test::merge_states(parts), whole = finish(c, run(c, d, spans, 0, 0, c.n, unit));
    double worst_merged = 0, worst_whole = 0;
    for (size_t i = 0; i < merged.size(); ++i) {
      worst_merged = std::max(worst_merged, std::fabs(double(merged[i]) - want[i]));
      worst_whole = std::max(worst_whole, std::fabs(double(whole[i]) - want[i]));
    }
    std::printf("[ attn bf16 ] %s, 700 keys: whole worst %.2e, split in 4 and merged %.2e\n",
                unit == ops::Bf16Tiles::None ? "VDPBF16PS" : ops::bf16_tiles_name(unit), worst_whole, worst_merged);
    EXPECT_LE(worst_merged, kBf16Tol);
    EXPECT_LE(worst_whole, kBf16Tol);
  }
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

// --- On AMX-BF16 tiles ---------------------------------------------------------------------------


TEST(AttentionBf16Tiles, MatchesDoublePrecisionOnTheSameRoundedOperands) {
  REQUIRE_BF16();
  std::mt19937 rng(12);
  // Heads per kv head from 1 to 16 (one tile's rows), head dims of 1 to 16 steps, key counts
  // that leave a short score block, an odd value pair, a partial softmax tile, or several tiles.
  const Bf16Case cases[] = {{8, 1, 256, 300}, {8, 1, 512, 129}, {1, 1, 32, 1},  {3, 2, 64, 17},
                            {16, 1, 64, 128}, {13, 1, 96, 257}, {2, 4, 32, 3},  {4, 2, 256, 33},
                            {5, 1, 128, 77},  {8, 1, 512, 700}};
  for (const Bf16Case& c : cases)
    for (float scale : {1.0f, 6.0f}) {
      const Data d = make(c, rng, scale);
      const double worst = worst_against_truth(c, d, attention_tile_unit());
      std::printf("[ attn tiles ] %s G %lld kvh %lld hd %lld n %lld scale %.0f: worst |delta| %.2e\n",
                  ops::bf16_tiles_name(attention_tile_unit()), (long long)c.G, (long long)c.kvh, (long long)c.hd, (long long)c.n,
                  double(scale), worst);
      EXPECT_LE(worst, kBf16Tol) << "G " << c.G << " hd " << c.hd << " n " << c.n;
    }
}

// Spans in separate buffers, each followed by rows of NaN: a kernel that loaded 16 key rows past a
// span's end (instead of staging the rows across the edge) would read the NaNs.
TEST(AttentionBf16Tiles, SpansInSeparateBuffersChangeNoBit) {
  REQUIRE_BF16();
  std::mt19937 rng(10);
  const Bf16Case c{8, 1, 64, 300};
  const Data d = make(c, rng, 2.0f);
  const size_t row = size_t(c.kvh * c.hd);
  std::vector<std::vector<uint16_t>> ks, vs;
  std::vector<ops::KvSpan> spans;
  int64_t at = 0;
  for (int64_t len : {5, 16, 40, 1, 33, 100, 105}) {
    ks.emplace_back((size_t(len) + 16) * row, uint16_t(0x7FC0));  // NaN rows after the span's own
    vs.emplace_back((size_t(len) + 16) * row, uint16_t(0x7FC0));
    std::copy_n(d.k.begin() + ptrdiff_t(size_t(at) * row), size_t(len) * row, ks.back().begin());
    std::copy_n(d.v.begin() + ptrdiff_t(size_t(at) * row), size_t(len) * row, vs.back().begin());
    at += len;
  }
  ASSERT_EQ(at, c.n);
  for (size_t i = 0; i < ks.size(); ++i)
    spans.push_back({KvElem::BF16, int64_t(ks[i].size() / row) - 16, ks[i].data(), vs[i].data(), nullptr, nullptr});
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, c.n}, {3, 250}, {128, 300}}) {
    const Result one = run(c, d, cut(c, d, {}), 0, b, e, attention_tile_unit());
    const Result sep = run(c, d, spans, 0, b, e, attention_tile_unit());
    EXPECT_EQ(0, std::memcmp(one.o.data(), sep.o.data(), one.o.size() * 4)) << "[" << b << ", " << e << ")";
    EXPECT_EQ(0, std::memcmp(one.l.data(), sep.l.data(), one.l.size() * 4)) << "[" << b << ", " << e << ")";
  }
}

// Where the CPU has confirmed tiles: the model and the hardware within the same bound of each
// other's truth (the hardware's order within one instruction is its own).
TEST(AttentionBf16Tiles, TheCheckPassesOnTheModelAndSaysWhyTheCpuIsNotUsed) {
  REQUIRE_BF16();
  const ops::TileKernelCheck model = ops::check_attention_tiles(ops::Bf16Tiles::Emulated);
  EXPECT_TRUE(model.run);
  EXPECT_TRUE(model.passed) << model.detail;
  const ops::TileKernelCheck& cpu = ops::amx_attention_kernel_check();
  if (!cpu.passed) {
    EXPECT_FALSE(cpu.detail.empty());
    std::vector<float> q(64), o(64), m(1), l(1);
    std::vector<uint16_t> kb(64), vb(64);
    const ops::KvSpan span{KvElem::BF16, 2, kb.data(), vb.data(), nullptr, nullptr};
    EXPECT_THROW(ops::attend_partial_bf16_tiles(ops::Bf16Tiles::Amx, q.data(), 1, ops::KvSpans{&span, 1, 1, 32}, 0, 0, 2,
                                                o.data(), m.data(), l.data()),
                 Error);
  }
  std::printf("[ attn tiles ] check on this CPU: %s\n", cpu.detail.c_str());
  // The context asks for attention tiles only where this CPU's check passed: never from a preset
  // that describes AMX-BF16 on a CPU without it, never without bf16 compute, never where the OS
  // refused tile state.
  EXPECT_EQ(test::context_for(host_cpu(), {.bf16_compute = true}).attention_tiles,
            cpu.passed ? ops::Bf16Tiles::Amx : ops::Bf16Tiles::None);
  if (!cpu.passed) {
    EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {.bf16_compute = true}).attention_tiles,
              ops::Bf16Tiles::None);
  }
  EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {}).attention_tiles, ops::Bf16Tiles::None);
  EXPECT_EQ(test::context_for(presets::sapphire_rapids_amx_refused(), {.bf16_compute = true}).attention_tiles,
            ops::Bf16Tiles::None);
}

TEST(AttentionBf16Tiles, RefusesShapesTypesAndUnitsItCannotRun) {
  REQUIRE_BF16();
  EXPECT_TRUE(ops::attention_tiles_fit(8, 256));
  EXPECT_TRUE(ops::attention_tiles_fit(16, 32));
  EXPECT_FALSE(ops::attention_tiles_fit(17, 256));
  EXPECT_FALSE(ops::attention_tiles_fit(8, 48));
  EXPECT_FALSE(ops::attention_tiles_fit(8, 16));
  std::vector<float> kf(128), vf(128), q(17 * 64), o(17 * 64), m(17), l(17);
  std::vector<uint16_t> kb(256), vb(256);
  const ops::KvSpan spans[] = {{KvElem::BF16, 2, kb.data(), vb.data(), nullptr, nullptr},
                               {KvElem::F32, 2, kf.data(), vf.data(), nullptr, nullptr}};
  const auto unit = ops::Bf16Tiles::Emulated;
  auto message = [&](const ops::KvSpans& ks, int64_t G, ops::Bf16Tiles u) -> std::string {
    try {
      ops::attend_partial_bf16_tiles(u, q.data(), G, ks, 0, 0, 2, o.data(), m.data(), l.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(ops::KvSpans{spans, 2, 1, 32}, 1, unit).find("span 1"), std::string::npos);  // f32 span
  EXPECT_THROW(ops::attend_partial_bf16_tiles(unit, q.data(), 1, ops::KvSpans{spans, 2, 1, 32}, 0, 0, 4, o.data(),
                                              m.data(), l.data()),
               Error);
  EXPECT_NE(message(ops::KvSpans{spans, 1, 1, 48}, 1, unit).find("head dim 48"), std::string::npos);
  EXPECT_NE(message(ops::KvSpans{spans, 1, 1, 64}, 17, unit).find("17 heads"), std::string::npos);
  EXPECT_NE(message(ops::KvSpans{spans, 1, 1, 64}, 1, ops::Bf16Tiles::None).find("no tile unit"), std::string::npos);
}

}  // namespace
}  // namespace g4
