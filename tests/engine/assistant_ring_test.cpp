// The assistant drafter over the engine's KV cache: its sliding layers read the newest W+1
// positions, one more than a ring of W slots keeps. With ring_extra_slots >= 1 the drafts equal
// those over a store that keeps every position, to the bit; without, the read is refused. On
// the SIMD kernels the drafter attends over the cache's own views (f32, f16, bf16, int8): over
// f32 views it matches the fixture, over the others the reference loops on the same store.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/kv_cache.h"
#include "model/dense_kv_store.h"
#include "model/assistant_step.h"
#include "model/forward_cached.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

// The target over the fixture's first p tokens in `kv` (one chunk) on `ex`: its hidden row p-1.
std::vector<float> prefill(const Model& target, KvStore& kv, int seq, const std::vector<int>& tokens, int64_t p,
                           const blocks::Exec& ex = {}) {
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < p; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == p - 1});
  std::vector<float> logits, hidden;
  forward_cached(target, rows, kv, ex, logits, &hidden);
  return hidden;
}

// That prefill, then k = 4 drafts from token p (on `draft_ex`).
std::vector<DraftStep> draft_after_prefill(const Model& target, const AssistantModel& d, KvStore& kv, int seq,
                                           const std::vector<int>& tokens, int64_t p, const blocks::Exec& prefill_ex = {},
                                           const blocks::Exec& draft_ex = {}) {
  const std::vector<float> hidden = prefill(target, kv, seq, tokens, p, prefill_ex);
  return draft(d, target, kv, seq, p, tokens[size_t(p)], hidden, 4, draft_ex);
}

// One fixture pair and a SIMD executor planned for both models, its row-wise steps split over
// the pool from one row on (the candidates' dots included).
struct SimdPair {
  std::filesystem::path dir;
  std::unique_ptr<Model> target;
  std::unique_ptr<AssistantModel> d;
  nlohmann::json manifest;
  ThreadPool pool{2};
  ops::MatmulContext mm;
  blocks::Exec ex;

  explicit SimdPair(const std::string& variant)
      : dir(test::fixtures_dir() / "gemma4-assistant-tiny" / variant),
        target(load_model(dir / "target")),
        d(load_assistant(dir / "assistant", *target)),
        manifest(nlohmann::json::parse(test::read_file(dir / "manifest.json"))) {
    mm = ops::make_matmul_context(&pool, host_cpu(),
                                  std::max(target->config.widest_matmul_input(), d->config.widest_matmul_input()), false,
                                  false);
    ex.matmul = &mm;
    ex.row_parallel_min_values = 1;
  }
  std::vector<int> tokens() const { return manifest["tokens"].get<std::vector<int>>(); }
};

TEST(AssistantOverKvCache, ARingOfWindowPlusOneDraftsAsAFullStore) {
  for (const std::string v : {"tiny-e-assistant", "tiny-31b-assistant"}) {
    const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / v;
    auto target = load_model(dir / "target");
    auto d = load_assistant(dir / "assistant", *target);
    const auto tokens = nlohmann::json::parse(test::read_file(dir / "manifest.json"))["tokens"].get<std::vector<int>>();
    for (int64_t p : {3, 6, 25, 39}) {  // before and after the ring of 5 + 1 wraps
      DenseKvStore full(target->config);
      const auto want = draft_after_prefill(*target, *d, full, full.add_sequence(), tokens, p);
      KvCacheOptions o;
      o.ring_extra_slots = 1;
      KvCache ring(target->config, o);
      const auto got = draft_after_prefill(*target, *d, ring, ring.add_sequence(), tokens, p);
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_EQ(got[j].logits, want[j].logits) << v << " p=" << p << " step " << j + 1;
        EXPECT_EQ(got[j].h_next, want[j].h_next) << v << " p=" << p << " step " << j + 1;
      }
    }
  }
}

TEST(AssistantOverKvCache, ARingOfWindowSlotsIsRefusedPastTheWindow) {
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-31b-assistant";
  auto target = load_model(dir / "target");
  auto d = load_assistant(dir / "assistant", *target);
  const auto tokens = nlohmann::json::parse(test::read_file(dir / "manifest.json"))["tokens"].get<std::vector<int>>();
  KvCache ring(target->config);  // W = 5 slots: position p-6 is gone once p > 5
  EXPECT_NO_THROW(draft_after_prefill(*target, *d, ring, ring.add_sequence(), tokens, 5));
  KvCache short_ring(target->config);
  EXPECT_THROW(draft_after_prefill(*target, *d, short_ring, short_ring.add_sequence(), tokens, 12), Error);
}

// The SIMD step over the cache's f32 views (no gathered copy) drafts the fixture's logits,
// h_next, tokens and candidates within its tolerance, at every start (before and after the ring
// wraps).
TEST(AssistantOverKvCache, SimdStepOverF32ViewsMatchesTheFixture) {
  for (const std::string v : {"tiny-e-assistant", "tiny-31b-assistant"}) {
    SimdPair s(v);
    const auto tokens = s.tokens();
    const auto logits = test::read_f32(s.dir / "draft_logits.f32");  // [S, k, V]
    const auto hnext = test::read_f32(s.dir / "draft_hnext.f32");    // [S, k, H_t]
    const size_t V = size_t(s.target->config.vocab_size), Ht = size_t(s.target->config.hidden_size);
    float worst = 0;
    for (size_t si = 0; si < s.manifest["starts"].size(); ++si) {
      const auto& start = s.manifest["starts"][si];
      KvCache ring(s.target->config, KvCacheOptions{.ring_extra_slots = 1});
      ASSERT_EQ(ring.view_element(), ops::KvElem::F32);
      const auto got = draft_after_prefill(*s.target, *s.d, ring, ring.add_sequence(), tokens,
                                           start["p"].get<int64_t>(), s.ex, s.ex);
      const auto want = start["draft_tokens"].get<std::vector<int>>();
      for (size_t j = 0; j < got.size(); ++j) {
        const size_t at = si * got.size() + j;
        worst = std::max(worst, test::max_abs_diff(got[j].logits.data(), &logits[at * V], V));
        worst = std::max(worst, test::max_abs_diff(got[j].h_next.data(), &hnext[at * Ht], Ht));
        EXPECT_EQ(got[j].token, want[j]) << v << " p=" << start["p"] << " step " << j + 1;
      }
    }
    EXPECT_LE(worst, 1e-3f) << v;  // the fixture README's bound
    std::printf("[ drafter ] %s SIMD over f32 cache views: max |delta| = %.3g\n", v.c_str(), worst);
  }
}

// Over f16, bf16 and int8 views the SIMD step widens the stored values as the reference's
// KvStore::read does: the same cache drafts the same tokens and candidates on both paths, the
// logits and h_next apart by summation order only.
TEST(AssistantOverKvCache, SimdStepOverRoundedViewsDraftsAsTheReference) {
  for (const std::string v : {"tiny-e-assistant", "tiny-31b-assistant"}) {
    SimdPair s(v);
    const auto tokens = s.tokens();
    for (KvDType dt : {KvDType::F16, KvDType::BF16, KvDType::Int8}) {
      float worst = 0;
      for (int64_t p : {3, 6, 25, 39}) {  // before and after the ring of 5 + 1 wraps
        KvCache ring(s.target->config, KvCacheOptions{.dtype = dt, .ring_extra_slots = 1});
        ASSERT_EQ(ring.view_element(), kv_span_element(dt));
        const int seq = ring.add_sequence();
        const std::vector<float> hidden = prefill(*s.target, ring, seq, tokens, p);
        const auto simd = draft(*s.d, *s.target, ring, seq, p, tokens[size_t(p)], hidden, 4, s.ex);
        const auto ref = draft(*s.d, *s.target, ring, seq, p, tokens[size_t(p)], hidden, 4);
        for (size_t j = 0; j < ref.size(); ++j) {
          const std::string where = v + " " + kv_dtype_name(dt) + " p=" + std::to_string(p) + " step " + std::to_string(j + 1);
          EXPECT_EQ(simd[j].token, ref[j].token) << where;
          EXPECT_EQ(simd[j].candidates, ref[j].candidates) << where;
          worst = std::max(worst, test::max_abs_diff(simd[j].logits.data(), ref[j].logits.data(), ref[j].logits.size()));
          worst = std::max(worst, test::max_abs_diff(simd[j].h_next.data(), ref[j].h_next.data(), ref[j].h_next.size()));
        }
      }
      EXPECT_LE(worst, 1e-4f) << v << " " << kv_dtype_name(dt);
      std::printf("[ drafter ] %s SIMD vs reference over %s cache views: max |delta| = %.3g\n", v.c_str(),
                  kv_dtype_name(dt), worst);
    }
  }
}

}  // namespace
}  // namespace g4
