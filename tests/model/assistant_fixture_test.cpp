// The assistant drafter against the shared fixtures (shared/fixtures/gemma4-assistant-tiny, made
// by an independent float64 transcription of transformers' Gemma4AssistantForCausalLM): the
// target's final-normed hidden rows from the cached pass, then k = 4 draft steps from each start,
// on the reference loops and on the SIMD kernels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "model/dense_kv_store.h"
#include "model/assistant_step.h"
#include "model/forward_cached.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr float kTolerance = 1e-3f;  // the fixture README's bound on logits, h_next and target rows

std::filesystem::path assistant_fixture(const std::string& variant) {
  return test::fixtures_dir() / "gemma4-assistant-tiny" / variant;
}

// What one start produced: the target's normed hidden row p-1 and its logits, and k steps.
struct StartRun {
  std::vector<float> hidden, target_logits;
  std::vector<DraftStep> steps;
};

// The target over tokens [0, p) through a cache that keeps every position, then k draft steps
// from y = tokens[p] and the target's hidden row p-1.
StartRun run_start(const Model& target, const AssistantModel& d, const std::vector<int>& tokens, int64_t p, int k,
                   const blocks::Exec& ex) {
  DenseKvStore kv(target.config);
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < p; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == p - 1});
  StartRun r;
  forward_cached(target, rows, kv, ex, r.target_logits, &r.hidden);
  r.steps = draft(d, target, kv, seq, p, tokens[size_t(p)], r.hidden, k, ex);
  return r;
}

class AssistantFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = assistant_fixture(GetParam());
    manifest_ = nlohmann::json::parse(test::read_file(dir_ / "manifest.json"));
    target_ = load_model(dir_ / "target");
    drafter_ = load_assistant(dir_ / "assistant", *target_);
    tokens_ = manifest_["tokens"].get<std::vector<int>>();
    V_ = manifest_["vocab_size"].get<int64_t>();
    Ht_ = manifest_["target_hidden_size"].get<int64_t>();
    k_ = manifest_["k"].get<int>();
  }

  // Runs every start on `ex` and checks it against the fixture; returns the largest deviation.
  float check_all_starts(const blocks::Exec& ex) {
    const auto logits = test::read_f32(dir_ / "draft_logits.f32");  // [S, k, V]
    const auto hnext = test::read_f32(dir_ / "draft_hnext.f32");     // [S, k, H_t]
    const auto hidden = test::read_f32(dir_ / "target_hidden.f32");  // [T, H_t]
    const auto tlogits = test::read_f32(dir_ / "target_logits.f32");  // [T, V]
    const bool centroid = drafter_->config.use_ordered_embeddings;
    const auto cands = centroid ? test::read_i32(dir_ / "draft_candidates.i32") : std::vector<int>{};
    const size_t n_cand = centroid ? cands.size() / (manifest_["starts"].size() * size_t(k_)) : 0;
    float worst = 0;
    for (size_t s = 0; s < manifest_["starts"].size(); ++s) {
      const auto& start = manifest_["starts"][s];
      const int64_t p = start["p"].get<int64_t>();
      const StartRun r = run_start(*target_, *drafter_, tokens_, p, k_, ex);
      worst = std::max(worst, test::max_abs_diff(r.hidden.data(), &hidden[size_t((p - 1) * Ht_)], size_t(Ht_)));
      worst = std::max(worst, test::max_abs_diff(r.target_logits.data(), &tlogits[size_t((p - 1) * V_)], size_t(V_)));
      const auto want_tokens = start["draft_tokens"].get<std::vector<int>>();
      for (int j = 0; j < k_; ++j) {
        const DraftStep& st = r.steps[size_t(j)];
        const size_t at = s * size_t(k_) + size_t(j);
        worst = std::max(worst, test::max_abs_diff(st.logits.data(), &logits[at * size_t(V_)], size_t(V_)));
        worst = std::max(worst, test::max_abs_diff(st.h_next.data(), &hnext[at * size_t(Ht_)], size_t(Ht_)));
        EXPECT_EQ(st.token, want_tokens[size_t(j)]) << "start p=" << p << " step " << j + 1;
        if (centroid) {
          EXPECT_EQ(st.candidates, std::vector<int>(cands.begin() + ptrdiff_t(at * n_cand),
                                                    cands.begin() + ptrdiff_t((at + 1) * n_cand)))
              << "start p=" << p << " step " << j + 1;
        }
      }
    }
    return worst;
  }

  std::filesystem::path dir_;
  nlohmann::json manifest_;
  std::unique_ptr<Model> target_;
  std::unique_ptr<AssistantModel> drafter_;
  std::vector<int> tokens_;
  int64_t V_ = 0, Ht_ = 0;
  int k_ = 0;
};

TEST_P(AssistantFixture, ReferenceMatchesDraftLogitsHiddenAndTokens) {
  const float worst = check_all_starts({});
  EXPECT_LE(worst, kTolerance);
  std::printf("[ drafter ] %s reference max |delta| = %.3g\n", GetParam().c_str(), worst);
}

TEST_P(AssistantFixture, SimdKernelsMatchDraftLogitsHiddenAndTokens) {
  ThreadPool pool(2);
  const ops::MatmulContext mm = ops::make_matmul_context(
      &pool, host_cpu(), std::max(target_->config.widest_matmul_input(), drafter_->config.widest_matmul_input()), false,
      false);
  blocks::Exec ex;
  ex.matmul = &mm;
  const float worst = check_all_starts(ex);
  EXPECT_LE(worst, kTolerance);
  std::printf("[ drafter ] %s SIMD max |delta| = %.3g\n", GetParam().c_str(), worst);
}

// The sliding layers see the newest W+1 positions. The other two readings of the window (W
// entries, W-1 entries) move step-1 logits by several units at some start in both fixtures
// (manifest "discrimination"), so matching the reference is not an accident of the window.
TEST_P(AssistantFixture, OtherSlidingWindowReadingsAreNotWhatIsMatched) {
  const auto logits = test::read_f32(dir_ / "draft_logits.f32");
  for (const char* other : {"draft_logits_exclusive.f32", "draft_logits_llamacpp.f32"}) {
    const auto theirs = test::read_f32(dir_ / other);
    float off_theirs = 0, off_ours = 0;
    for (size_t s = 0; s < manifest_["starts"].size(); ++s) {
      const int64_t p = manifest_["starts"][s]["p"].get<int64_t>();
      const StartRun r = run_start(*target_, *drafter_, tokens_, p, 1, {});
      const size_t at = s * size_t(k_) * size_t(V_);  // step 1 of start s
      off_theirs = std::max(off_theirs, test::max_abs_diff(r.steps[0].logits.data(), &theirs[at], size_t(V_)));
      off_ours = std::max(off_ours, test::max_abs_diff(r.steps[0].logits.data(), &logits[at], size_t(V_)));
    }
    EXPECT_GT(off_theirs, 1.0f) << other;
    EXPECT_LE(off_ours, kTolerance);
  }
}

// Draft steps read the cache and never write it: a second draft from the same state is the same.
TEST_P(AssistantFixture, DraftingLeavesTheCacheAsItWas) {
  DenseKvStore kv(target_->config);
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < 12; ++t) rows.push_back({seq, t, tokens_[size_t(t)], t == 11});
  std::vector<float> logits, hidden;
  forward_cached(*target_, rows, kv, {}, logits, &hidden);
  const auto a = draft(*drafter_, *target_, kv, seq, 12, tokens_[12], hidden, 3);
  EXPECT_EQ(kv.length(seq), 12);
  const auto b = draft(*drafter_, *target_, kv, seq, 12, tokens_[12], hidden, 3);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(a[size_t(j)].logits, b[size_t(j)].logits);
}

INSTANTIATE_TEST_SUITE_P(BothVariants, AssistantFixture, ::testing::Values("tiny-e-assistant", "tiny-31b-assistant"));

}  // namespace
}  // namespace g4
