// The SIMD attention kernel against the reference loops (ref::attend_row, the reference the cached forward pass uses:
// ref::dot with scaling 1.0, ref::softmax, Σ p·v in f32), for every stored K/V element type,
// head sizes that are not a multiple of any vector width, GQA groups, a single key, long
// ranges, keys spread over many spans, sub-ranges, and split ranges merged afterwards.
//
// Tolerance: the reference and the kernel see exactly the same f32 values of K and V (the
// reference widens the stored elements the way KvRows::read does), so the difference is f32
// rounding only: a different summation order in q·k, exp to 1 ulp, online rescaling. Outputs
// are convex combinations of values in [-1, 1]; we require |kernel - reference| <= 2e-5 with
// scores up to about ±40 (measured worst about 2e-6; printed per case).
#include "ops/attention/attention_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_span_checks.h"
#include "ops/ref/reference_ops.h"
#include "platform/dtype.h"
#include "platform/error.h"

namespace g4 {
namespace {

using ops::KvElem;

constexpr float kTol = 2e-5f;

// K or V rows [n, kvh, hd] stored as `elem`, plus the f32 values the reference reads.
struct Stored {
  std::vector<float> f32;      // what the reference sees
  std::vector<uint16_t> half;  // F16 / BF16
  std::vector<int8_t> q;       // I8
  std::vector<float> scale;    // I8: [n, kvh]
  std::vector<float> raw;      // F32 storage
  const void* data(KvElem e) const {
    switch (e) {
      case KvElem::F32: return raw.data();
      case KvElem::F16:
      case KvElem::BF16: return half.data();
      case KvElem::I8: return q.data();
    }
    return nullptr;
  }
  size_t elem_size(KvElem e) const { return e == KvElem::F32 ? 4 : e == KvElem::I8 ? 1 : 2; }
};

Stored make_rows(KvElem e, int64_t n, int64_t kvh, int64_t hd, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t count = size_t(n * kvh * hd);
  std::vector<float> x(count);
  for (float& v : x) v = u(rng);
  Stored s;
  s.f32.resize(count);
  switch (e) {
    case KvElem::F32:
      s.raw = x;
      s.f32 = x;
      break;
    case KvElem::F16:
    case KvElem::BF16:
      s.half.resize(count);
      for (size_t i = 0; i < count; ++i) {
        s.half[i] = e == KvElem::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        s.f32[i] = e == KvElem::F16 ? f16_to_f32(s.half[i]) : bf16_to_f32(s.half[i]);
      }
      break;
    case KvElem::I8:
      s.q.resize(count);
      s.scale.resize(size_t(n * kvh));
      for (int64_t r = 0; r < n * kvh; ++r) {
        float amax = 0;
        for (int64_t d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(x[size_t(r * hd + d)]));
        const float sc = amax / 127.0f, inv = sc > 0 ? 1.0f / sc : 0.0f;
        s.scale[size_t(r)] = sc;
        for (int64_t d = 0; d < hd; ++d) {
          const size_t i = size_t(r * hd + d);
          s.q[i] = int8_t(std::lrint(std::clamp(x[i] * inv, -127.0f, 127.0f)));
          s.f32[i] = float(s.q[i]) * sc;  // as KvRows::read
        }
      }
      break;
  }
  return s;
}

struct Case {
  int64_t nH, kvh, hd, n;
};

// Spans cut at the given lengths (cycled) over rows stored contiguously.
std::vector<ops::KvSpan> cut_spans(KvElem e, const Stored& k, const Stored& v, int64_t n, int64_t kvh, int64_t hd,
                                   const std::vector<int64_t>& lengths) {
  std::vector<ops::KvSpan> spans;
  const size_t es = k.elem_size(e);
  int64_t pos = 0;
  for (size_t i = 0; pos < n; ++i) {
    const int64_t len = std::min(n - pos, lengths[i % lengths.size()]);
    ops::KvSpan sp;
    sp.elem = e;
    sp.n = len;
    sp.k = static_cast<const std::byte*>(k.data(e)) + size_t(pos * kvh * hd) * es;
    sp.v = static_cast<const std::byte*>(v.data(e)) + size_t(pos * kvh * hd) * es;
    if (e == KvElem::I8) {
      sp.k_scale = k.scale.data() + pos * kvh;
      sp.v_scale = v.scale.data() + pos * kvh;
    }
    spans.push_back(sp);
    pos += len;
  }
  return spans;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

const char* elem_name(KvElem e) {
  switch (e) {
    case KvElem::F32: return "f32";
    case KvElem::F16: return "f16";
    case KvElem::BF16: return "bf16";
    case KvElem::I8: return "int8";
  }
  return "?";
}

TEST(Attention, RowMatchesReferenceForEveryElementTypeAndShape) {
  const std::vector<Case> cases = {
      {1, 1, 1, 1},      {8, 1, 256, 1},   {8, 1, 256, 2},    {8, 1, 256, 5000}, {8, 1, 512, 700},
      {4, 2, 13, 37},    {6, 3, 37, 300},  {16, 8, 64, 129},  {2, 2, 17, 128},   {5, 1, 24, 257},
      {12, 4, 40, 1000}, {3, 3, 7, 3},     {8, 2, 33, 5000},
      {6, 2, 520, 333},  // from hd 512 the keys are scored as four streams: 3 rows, a tail of 8
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (KvElem e : {KvElem::F32, KvElem::BF16, KvElem::F16, KvElem::I8}) {
    float worst = 0;
    for (const Case& c : cases) {
      const Stored k = make_rows(e, c.n, c.kvh, c.hd, rng), v = make_rows(e, c.n, c.kvh, c.hd, rng);
      // Queries scaled so scores reach about ±40 (a peaked softmax, as normed q/k give).
      std::vector<float> q(size_t(c.nH * c.hd));
      const float qs = 40.0f / std::sqrt(float(c.hd));
      for (float& x : q) x = u(rng) * qs;
      std::vector<float> want(q.size()), got(q.size(), -1.0f);
      ref::attend_row(q.data(), k.f32.data(), v.f32.data(), c.n, c.nH, c.kvh, c.hd, want.data());
      std::vector<float> first;
      for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{{1 << 30}, {64}, {1, 5, 63, 130}}) {
        const auto spans = cut_spans(e, k, v, c.n, c.kvh, c.hd, cuts);
        const ops::KvSpans kv{spans.data(), spans.size(), c.kvh, c.hd};
        ops::attend_row(q.data(), c.nH, kv, 0, c.n, got.data());
        const float err = max_abs_diff(got, want);
        worst = std::max(worst, err);
        EXPECT_LE(err, kTol) << elem_name(e) << " nH " << c.nH << " kvh " << c.kvh << " hd " << c.hd << " n " << c.n
                             << " spans " << spans.size();
        // How the keys are cut into spans changes nothing, not even the rounding.
        if (first.empty()) first = got;
        else EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float))) << elem_name(e) << " n " << c.n;
      }
    }
    std::printf("[ attention ] %s: worst |kernel - reference| %.3g\n", elem_name(e), worst);
  }
}

// A sub-range [begin, end) of the keys (a sliding window) equals the reference over just those
// keys; splitting it at arbitrary points and merging the partial states gives the same answer.
TEST(Attention, SubRangesAndMergedSplitsMatchReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t nH = 8, kvh = 2, hd = 48, n = 2000, G = nH / kvh;
  for (KvElem e : {KvElem::F32, KvElem::BF16, KvElem::I8}) {
    const Stored k = make_rows(e, n, kvh, hd, rng), v = make_rows(e, n, kvh, hd, rng);
    const auto spans = cut_spans(e, k, v, n, kvh, hd, {64});
    const ops::KvSpans kv{spans.data(), spans.size(), kvh, hd};
    std::vector<float> q(size_t(nH * hd));
    for (float& x : q) x = u(rng) * 5.0f;
    for (auto [b, en] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1999, 2000}, {700, 1212}, {63, 65}, {5, 2000}}) {
      std::vector<float> want(q.size()), got(q.size());
      ref::attend_row(q.data(), &k.f32[size_t(b * kvh * hd)], &v.f32[size_t(b * kvh * hd)], en - b, nH, kvh, hd, want.data());
      ops::attend_row(q.data(), nH, kv, b, en, got.data());
      EXPECT_LE(max_abs_diff(got, want), kTol) << elem_name(e) << " [" << b << ", " << en << ")";
      // Split into up to 3 pieces, merged in order and out of order.
      for (int pieces : {2, 3}) {
        if (en - b < pieces) continue;
        std::vector<float> merged(q.size());
        for (int64_t kh = 0; kh < kvh; ++kh) {
          const int64_t step = (en - b) / pieces;
          std::vector<test::AttentionState> parts;
          auto attend = [&](int64_t pb, int64_t pe) {
            test::AttentionState& st = parts.emplace_back();
            st.o.resize(size_t(G * hd));
            st.m.resize(size_t(G));
            st.l.resize(size_t(G));
            ops::attend_partial(&q[size_t(kh * G * hd)], G, kv, kh, pb, pe, st.o.data(), st.m.data(), st.l.data());
          };
          attend(en - step, en);  // the last first
          for (int p = 0; p + 1 < pieces; ++p) {
            const int64_t pb = b + p * step;
            attend(pb, p + 2 == pieces ? en - step : pb + step);
          }
          const std::vector<float> out = test::merge_states(parts);
          std::copy(out.begin(), out.end(), merged.begin() + kh * G * hd);
        }
        EXPECT_LE(max_abs_diff(merged, want), kTol) << elem_name(e) << " [" << b << ", " << en << ") in " << pieces;
      }
    }
  }
}

// attend_merge_finish skips an empty part (l = 0, whatever its o and m hold: here NaN and a maximum
// above the others') and gives the
// bits of merging the others alone; it refuses parts that hold no keys and a stride shorter than
// a state, naming them.
TEST(Attention, MergeSkipsEmptyPartsAndRefusesNone) {
  std::mt19937 rng(9);
  const int64_t G = 4, hd = 40, n = 300;
  const Stored k = make_rows(KvElem::F32, n, 1, hd, rng), v = make_rows(KvElem::F32, n, 1, hd, rng);
  const auto spans = cut_spans(KvElem::F32, k, v, n, 1, hd, {n});
  const ops::KvSpans kv{spans.data(), spans.size(), 1, hd};
  std::vector<float> q(size_t(G * hd));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : q) x = u(rng) * 4.0f;
  auto part = [&](int64_t b, int64_t e) {
    test::AttentionState st{std::vector<float>(size_t(G * hd)), std::vector<float>(size_t(G)), std::vector<float>(size_t(G))};
    ops::attend_partial(q.data(), G, kv, 0, b, e, st.o.data(), st.m.data(), st.l.data());
    return st;
  };
  const test::AttentionState a = part(0, 170), b = part(170, 300);
  test::AttentionState empty{std::vector<float>(size_t(G * hd), std::numeric_limits<float>::quiet_NaN()),
                             std::vector<float>(size_t(G), 60.0f), std::vector<float>(size_t(G), 0.0f)};
  const std::vector<float> two = test::merge_states({a, b}), three = test::merge_states({a, empty, b});
  EXPECT_EQ(0, std::memcmp(two.data(), three.data(), two.size() * 4));
  std::vector<float> want(size_t(G * hd));
  ref::attend_row(q.data(), k.f32.data(), v.f32.data(), n, G, 1, hd, want.data());
  EXPECT_LE(max_abs_diff(two, want), kTol);
  try {
    test::merge_states({empty, empty});
    ADD_FAILURE() << "parts without keys were merged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no keys"), std::string::npos) << e.what();
  }
  std::vector<float> states(size_t(2 * G * (hd + 2))), out(size_t(G * hd));
  try {
    ops::attend_merge_finish(G, hd, states.data(), size_t(G * (hd + 2) - 1), 2, out.data());
    ADD_FAILURE() << "a stride shorter than a state was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("floats apart"), std::string::npos) << e.what();
  }
}

// The query rows may live anywhere (the kernel copies them onto cache lines, aligned_rows.h,
// since a row at malloc's 16-byte offset split every vector load in two): the same rows at every
// float offset within a cache line give the same bits, and match the reference.
TEST(Attention, QueryPlacementChangesNoBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t hd : {int64_t(512), int64_t(40)}) {  // a whole number of vectors, and a tail
    const int64_t nH = 8, kvh = 1, n = 300;
    const Stored k = make_rows(KvElem::BF16, n, kvh, hd, rng), v = make_rows(KvElem::BF16, n, kvh, hd, rng);
    const auto spans = cut_spans(KvElem::BF16, k, v, n, kvh, hd, {64});
    const ops::KvSpans kv{spans.data(), spans.size(), kvh, hd};
    std::vector<float> q0(size_t(nH * hd));
    for (float& x : q0) x = u(rng) * 3.0f;
    std::vector<float> want(q0.size()), first(q0.size());
    ref::attend_row(q0.data(), k.f32.data(), v.f32.data(), n, nH, kvh, hd, want.data());
    std::vector<float> buf(q0.size() + 16);
    for (size_t off = 0; off < 16; ++off) {
      std::fill(buf.begin(), buf.end(), std::nanf(""));  // anything read beyond the rows shows
      std::copy(q0.begin(), q0.end(), buf.begin() + std::ptrdiff_t(off));
      std::vector<float> got(q0.size());
      ops::attend_row(buf.data() + off, nH, kv, 0, n, got.data());
      if (off == 0) {
        first = got;
        EXPECT_LE(max_abs_diff(got, want), kTol) << "hd " << hd;
      }
      EXPECT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
          << "hd " << hd << ", offset " << off;
    }
  }
}

// Equal keys: the softmax is uniform, so the output is exactly the mean of V; a single huge
// score picks its value row (no overflow, no NaN).
TEST(Attention, UniformAndOneHotSoftmax) {
  const int64_t nH = 2, kvh = 1, hd = 20, n = 300;
  std::vector<float> k(size_t(n * hd), 0.5f), v(size_t(n * hd)), q(size_t(nH * hd), 1.0f);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t d = 0; d < hd; ++d) v[size_t(s * hd + d)] = float(s % 7) - 3.0f;
  ops::KvSpan sp{KvElem::F32, n, k.data(), v.data(), nullptr, nullptr};
  const ops::KvSpans kv{&sp, 1, kvh, hd};
  std::vector<float> out(q.size());
  ops::attend_row(q.data(), nH, kv, 0, n, out.data());
  double mean = 0;
  for (int64_t s = 0; s < n; ++s) mean += double(s % 7) - 3.0;
  mean /= double(n);
  for (float x : out) EXPECT_NEAR(x, mean, 1e-5);
  for (int64_t d = 0; d < hd; ++d) k[size_t(123 * hd + d)] = 1e4f;  // score 2e5 for position 123
  ops::attend_row(q.data(), nH, kv, 0, n, out.data());
  for (float x : out) EXPECT_NEAR(x, float(123 % 7) - 3.0f, 1e-6);
}

// Softmax weights below e^-44 relative to the largest are dropped (subnormal weights made every
// FMA take a microcode assist on Intel cores). What stays must be every weight a result can
// show: a weight of e^-17 (4e-8) on a value of 1e6 moves the output by 0.04 and must be kept;
// weights of e^-50, e^-100 and e^-1000 (subnormal or zero in f32) on the same value move it by
// < 1e-15. The truth is a double-precision softmax over all the positions.
TEST(Attention, DropsOnlySoftmaxWeightsNoResultCanShow) {
  const int64_t hd = 16;
  const std::vector<float> scores = {0.0f, -17.0f, -50.0f, -100.0f, -3.0f, -44.5f, -43.5f, -1000.0f};
  const std::vector<float> values = {0.0f, 1e6f, 1e6f, 1e6f, 1.0f, 1e6f, -1e6f, 1e6f};
  const int64_t n = int64_t(scores.size());
  for (int64_t reps : {1, 40}) {  // 40 copies: the tail spans several 128-position tiles
    const int64_t N = n * reps;
    std::vector<float> k(size_t(N * hd), 0.0f), v(size_t(N * hd), 0.0f), q(size_t(hd), 0.0f);
    q[0] = 1.0f;
    double num = 0, den = 0;
    for (int64_t s = 0; s < N; ++s) {
      k[size_t(s * hd)] = scores[size_t(s % n)];
      for (int64_t d = 0; d < hd; ++d) v[size_t(s * hd + d)] = values[size_t(s % n)];
      const double w = std::exp(double(scores[size_t(s % n)]));
      num += w * double(values[size_t(s % n)]);
      den += w;
    }
    const double want = num / den;
    ops::KvSpan sp{KvElem::F32, N, k.data(), v.data(), nullptr, nullptr};
    const ops::KvSpans kv{&sp, 1, 1, hd};
    std::vector<float> out(static_cast<size_t>(hd));
    ops::attend_row(q.data(), 1, kv, 0, N, out.data());
    for (float x : out) EXPECT_NEAR(x, want, 1e-6 * std::fabs(want)) << reps << " copies";
  }
}

TEST(Attention, RefusesBadRanges) {
  std::vector<float> k(16), v(16), q(16), o(16), m(1), l(1);
  ops::KvSpan sp{KvElem::F32, 4, k.data(), v.data(), nullptr, nullptr};
  const ops::KvSpans kv{&sp, 1, 1, 4};
  EXPECT_THROW(ops::attend_partial(q.data(), 1, kv, 0, 0, 5, o.data(), m.data(), l.data()), Error);  // past the keys
  EXPECT_THROW(ops::attend_partial(q.data(), 1, kv, 0, 2, 2, o.data(), m.data(), l.data()), Error);  // empty
  EXPECT_THROW(ops::attend_partial(q.data(), 1, kv, 1, 0, 2, o.data(), m.data(), l.data()), Error);  // kv head
  EXPECT_THROW(ops::attend_row(q.data(), 3, ops::KvSpans{&sp, 1, 2, 4}, 0, 2, o.data()), Error);    // 3 heads, 2 kv
  // A group or head size whose scratch (scores and aligned query rows) cannot be had, or whose
  // size wraps a size_t (2^60 rows x 144 floats = 9 x 2^64 floats), is refused with the numbers
  // before anything is allocated or read.
  const std::vector<std::pair<int64_t, int64_t>> too_wide = {
      {int64_t(1) << 36, 4}, {int64_t(1) << 60, 4}, {1, int64_t(1) << 42}};
  for (auto [group, hd] : too_wide) {
    const ops::KvSpans wide{&sp, 1, 1, hd};
    try {
      ops::attend_partial(q.data(), group, wide, 0, 0, 2, o.data(), m.data(), l.data());
      ADD_FAILURE() << "no error for " << group << " rows of " << hd;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(group) + " query rows of " + std::to_string(hd)),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace g4
