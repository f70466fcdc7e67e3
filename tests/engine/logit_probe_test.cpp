// The logit probe behind `--weights q8|q4`'s report: the comparison's arithmetic against values
// worked by hand, its refusals, the probe's tokens, and its logits against the reference loops.
#include "engine/logit_probe.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "model/forward_reference.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

// The matmul policies of a probe run: policy compute = bf16, policy activations = q8 when set.
struct ProbePolicy {
  bool bf16_compute = false;
  bool int8_activations = false;
};

ops::MatmulContext probe_matmul(ThreadPool& pool, const ModelConfig& c, ProbePolicy p) {
  return ops::make_matmul_context(&pool, host_cpu(), c.widest_matmul_input(), p.bf16_compute, p.int8_activations);
}

TEST(LogitProbe, CompareLogitsMatchesHandArithmetic) {
  // Row 0: ref [0, 0], got [0, ln 3]: softmax 1/2 1/2 vs 1/4 3/4, KL = 1/2 ln 2 + 1/2 ln(2/3)
  // = 1/2 ln(4/3); argmax 0 (the first of a tie) vs 1. Row 1: identical, argmax the same.
  const double ln3 = std::log(3.0);
  const std::vector<float> ref{0.0f, 0.0f, 1.0f, 2.0f}, got{0.0f, float(ln3), 1.0f, 2.0f};
  const LogitShift s = compare_logits(ref, got, 2);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.vocab, 2);
  EXPECT_NEAR(s.max_abs, ln3, 1e-6);
  EXPECT_NEAR(s.mean_abs, ln3 / 4, 1e-6);
  EXPECT_NEAR(s.rms_ratio, ln3 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(s.max_kl, 0.5 * std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(s.mean_kl, 0.25 * std::log(4.0 / 3.0), 1e-6);
  EXPECT_EQ(s.top1_same, 1);
  const std::string line = describe_logit_shift(s);
  EXPECT_NE(line.find("top-1 same 1/2"), std::string::npos) << line;
  EXPECT_NE(line.find("max |delta| 1.099"), std::string::npos) << line;
}

TEST(LogitProbe, IdenticalLogitsShowNoShift) {
  const std::vector<float> v{3.0f, -1.0f, 0.5f, 7.0f, 7.0f, -2.0f};
  const LogitShift s = compare_logits(v, v, 3);
  EXPECT_EQ(s.max_abs, 0.0);
  EXPECT_EQ(s.rms_ratio, 0.0);
  EXPECT_NEAR(s.mean_kl, 0.0, 1e-12);
  EXPECT_EQ(s.top1_same, 2);
}

TEST(LogitProbe, CompareLogitsRefusesMismatchedOrNonFiniteInput) {
  const std::vector<float> four{1, 2, 3, 4};
  EXPECT_THROW(compare_logits(four, {1, 2, 3}, 2), Error);  // sizes differ
  EXPECT_THROW(compare_logits(four, four, 3), Error);       // not whole rows
  EXPECT_THROW(compare_logits({}, {}, 2), Error);
  try {
    compare_logits(four, {1, 2, 3, NAN}, 2);
    FAIL() << "a NaN logit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1, logit 1"), std::string::npos) << e.what();
  }
}

TEST(LogitProbe, TokensAreFixedInRangeAndStartWithBos) {
  ModelConfig c;
  c.vocab_size = 512;
  c.bos_token_id = 2;
  const auto t = probe_tokens(c, 8);
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0], 2);
  EXPECT_EQ(t, probe_tokens(c, 8));
  std::set<int> distinct(t.begin() + 1, t.end());
  EXPECT_EQ(distinct.size(), 7u);
  for (size_t i = 1; i < t.size(); ++i) {
    EXPECT_GE(t[i], 4);
    EXPECT_LT(t[i], c.vocab_size);
  }
  EXPECT_THROW(probe_tokens(c, 0), Error);
}

// The probe's logits on the SIMD path (f32 activations), every row, against the reference
// loops' forward pass over the same tokens (no cache): the independent spec.
TEST(LogitProbe, SimdProbeLogitsMatchTheReferenceLoops) {
  const auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf");
  const auto tokens = probe_tokens(m->config, 8);
  const auto want = forward_reference(*m, tokens);
  ThreadPool pool(2);
  const ops::MatmulContext mm = probe_matmul(pool, m->config, {.bf16_compute = false, .int8_activations = false});
  const auto got = probe_logits(*m, tokens, blocks::Exec{&mm});
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), tokens.size() * size_t(m->config.vocab_size));
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LT(worst, 2e-3f);
  const LogitShift s = compare_logits(want, got, m->config.vocab_size);
  EXPECT_EQ(s.top1_same, s.rows);
}

// The probe's forward pass on a fixture sequence (<bos> first, as the probe starts) against the
// logits other implementations wrote for it: the external truth behind both paths above.
TEST(LogitProbe, ProbeLogitsMatchTheFixtureLogits) {
  const auto dir = test::fixtures_dir() / "gemma4-tiny" / "tiny-e";
  const auto m = load_model(dir / "hf");
  const auto exp = nlohmann::json::parse(test::read_file(dir / "expected.json"));
  const auto& seq = exp["sequences"][1];
  const auto tokens = seq["tokens"].get<std::vector<int>>();
  const auto want = test::read_f32(dir / "expected_logits.f32");
  const size_t V = size_t(m->config.vocab_size), off = seq["row_offset"].get<size_t>() * V;
  ThreadPool pool(2);
  const ops::MatmulContext mm = probe_matmul(pool, m->config, {.bf16_compute = false, .int8_activations = false});
  const auto got = probe_logits(*m, tokens, blocks::Exec{&mm});
  ASSERT_EQ(got.size(), tokens.size() * V);
  ASSERT_GE(want.size(), off + got.size());
  const std::vector<float> expected(want.begin() + ptrdiff_t(off), want.begin() + ptrdiff_t(off + got.size()));
  EXPECT_LT(test::max_abs_diff(got.data(), expected.data(), got.size()), 2e-3f);
}

}  // namespace
}  // namespace g4
