// The assistant drafter over the engine's KV cache: its sliding layers read the newest W+1
// positions, one more than a ring of W slots keeps. With ring_extra_slots >= 1 the drafts equal
// those over a store that keeps every position, to the bit; without, the read is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/kv_cache.h"
#include "model/dense_kv_store.h"
#include "model/assistant_step.h"
#include "model/forward_cached.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

// The target over the fixture's first p tokens in `kv` (one chunk), then k = 4 drafts from token p.
std::vector<DraftStep> draft_after_prefill(const Model& target, const AssistantModel& d, KvStore& kv, int seq,
                                           const std::vector<int>& tokens, int64_t p) {
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < p; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == p - 1});
  std::vector<float> logits, hidden;
  forward_cached(target, rows, kv, {}, logits, &hidden);
  return draft(d, target, kv, seq, p, tokens[size_t(p)], hidden, 4);
}

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

}  // namespace
}  // namespace g4
