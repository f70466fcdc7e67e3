// The prefix cache against the independent truth: the same request on an engine without one
// (prefilled from token 0). Logits (through logprobs) and tokens must be identical bit for bit,
// for shared prefixes shorter than, equal to and longer than the sliding window (8 on the tiny
// fixtures), on and off block boundaries (blocks of 4), reaching into a cached sequence's
// generated tokens, with requests batched together, on every fixture model (KV sharing, MoE).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace prefix_cache_test {

struct Output {
  std::vector<int> tokens;
  std::vector<float> logprobs;
  GenerationEvent final_event;
  bool finished = false;
};

EventCallback collect(Output& o) {
  return [&o](const GenerationEvent& e) {
    for (const auto& t : e.tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
    }
    if (e.finished) {
      o.finished = true;
      o.final_event = e;
    }
  };
}

SamplingParams sampled(uint64_t seed, int n) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  p.max_tokens = n;
  p.logprobs = true;
  return p;
}

std::vector<int> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t;
  for (size_t i = 0; i < n; ++i) t.push_back(3 + int(rng() % 500));
  return t;
}

EngineOptions options(bool cache, int threads) {
  EngineOptions o;
  o.max_seqs = 4;
  o.prefill_chunk = 6;
  o.threads = threads;
  o.kv.block_tokens = 4;
  if (cache) {
    o.prefix_cache_bytes = 64u << 20;
    o.prefix_cache_min_tokens = 1;
  }
  return o;
}

class PrefixCacheFixture : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(PrefixCacheFixture, HitsGiveTheColdLogitsBitForBit) {
  const auto& [variant, threads] = GetParam();
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / variant / "hf");
  const std::vector<int> first = random_tokens(40, 1);
  Engine cached(*m, options(true, threads));
  Output a;
  cached.submit({first, sampled(1, 10)}, collect(a));
  cached.run_until_idle();
  ASSERT_TRUE(a.finished);
  ASSERT_EQ(a.final_event.finish_reason, "length");
  // The cached sequence: the prompt and the 9 generated tokens that were fed back.
  std::vector<int> fed = first;
  fed.insert(fed.end(), a.tokens.begin(), a.tokens.end() - 1);

  // Shared prefixes: below, at and past the window (8), on and off blocks (4), the whole prompt,
  // into the generated part, and all of it.
  const std::vector<int64_t> shared = {3, 7, 8, 9, 16, 17, 30, 40, 44, int64_t(fed.size())};
  std::vector<std::vector<int>> prompts;
  for (size_t i = 0; i < shared.size(); ++i) {
    std::vector<int> p(fed.begin(), fed.begin() + shared[i]);
    for (int t : random_tokens(5 + i, 100 + uint32_t(i))) p.push_back(t);
    prompts.push_back(p);
  }
  // Batched: all submitted at once, four running together.
  std::vector<Output> hot(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) cached.submit({prompts[i], sampled(7 + i, 6)}, collect(hot[i]));
  cached.run_until_idle();
  for (size_t i = 0; i < prompts.size(); ++i) {
    Engine cold(*m, options(false, threads));
    Output c;
    cold.submit({prompts[i], sampled(7 + i, 6)}, collect(c));
    cold.run_until_idle();
    EXPECT_GE(hot[i].final_event.cached_tokens, shared[i]) << variant << " prefix " << shared[i];
    EXPECT_EQ(hot[i].tokens, c.tokens) << variant << " prefix " << shared[i];
    EXPECT_EQ(hot[i].logprobs, c.logprobs) << variant << " prefix " << shared[i];
    EXPECT_EQ(c.final_event.cached_tokens, 0);
  }
  const PrefixCacheStats st = cached.prefix_cache_stats();
  EXPECT_EQ(st.hits, int64_t(prompts.size()));
  EXPECT_GT(st.hit_tokens, 0);
  EXPECT_EQ(st.lookups, int64_t(prompts.size()) + 1);
  EXPECT_EQ(cached.prefilled_tokens() + st.hit_tokens, st.hit_tokens + st.miss_tokens);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, PrefixCacheFixture,
                         ::testing::Combine(::testing::Values("tiny-e", "tiny-31b", "tiny-moe"), ::testing::Values(0, 2)),
                         [](const auto& p) {
                           std::string n = std::get<0>(p.param) + (std::get<1>(p.param) ? "_simd" : "_reference");
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A cache too small for what it is offered keeps within its budget by dropping the least recently
// used entries, and what is served never changes: each answer equals the cold one.
TEST(PrefixCache, EvictionUnderPressureNeverChangesOutput) {
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-31b" / "hf");
  EngineOptions o = options(true, 0);
  o.prefix_cache_bytes = 200u << 10;  // a few entries' worth
  o.kv.max_total_tokens = 256;        // and a small block pool, shared with running sequences
  Engine cached(*m, o);
  EngineOptions c = options(false, 0);
  c.kv.max_total_tokens = 256;
  Engine cold(*m, c);
  const std::vector<int> system = random_tokens(24, 5);
  for (int turn = 0; turn < 12; ++turn) {
    std::vector<int> p = system;
    for (int t : random_tokens(size_t(4 + turn % 5), 200 + uint32_t(turn))) p.push_back(t);
    Output h, x;
    cached.submit({p, sampled(uint64_t(turn), 8)}, collect(h));
    cold.submit({p, sampled(uint64_t(turn), 8)}, collect(x));
    cached.run_until_idle();
    cold.run_until_idle();
    EXPECT_EQ(h.logprobs, x.logprobs) << "turn " << turn;
    EXPECT_LE(cached.prefix_cache_stats().bytes, o.prefix_cache_bytes);
  }
  const PrefixCacheStats st = cached.prefix_cache_stats();
  EXPECT_GT(st.evictions, 0);
  EXPECT_GT(st.hits, 0);
}

// Cached entries fill the block pool while four sequences grow at once: the step makes room for
// all their new blocks together (each alone would fit; together they would not), and nothing
// changes in what is served.
TEST(PrefixCache, SequencesGrowingTogetherEvictEntriesInsteadOfFailing) {
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-31b" / "hf");
  auto opts = [](bool cache) {
    EngineOptions o = options(cache, 0);
    o.max_context = 64;
    o.kv.max_total_tokens = 4 * 64;  // exactly max_seqs full contexts, as g4 serve sizes it
    return o;
  };
  Engine cached(*m, opts(true)), cold(*m, opts(false));
  const std::vector<int> shared = random_tokens(20, 11);
  std::vector<Output> hot(12), ref(12);
  for (size_t i = 0; i < hot.size(); ++i) {
    std::vector<int> p = shared;
    for (int t : random_tokens(4 + i % 3, 400 + uint32_t(i))) p.push_back(t);
    cached.submit({p, sampled(i, 30)}, collect(hot[i]));
    cold.submit({p, sampled(i, 30)}, collect(ref[i]));
  }
  cached.run_until_idle();
  cold.run_until_idle();
  for (size_t i = 0; i < hot.size(); ++i) {
    EXPECT_EQ(hot[i].final_event.finish_reason, "length") << i << ": " << hot[i].final_event.error;
    EXPECT_EQ(hot[i].logprobs, ref[i].logprobs) << "request " << i;
  }
  EXPECT_GT(cached.prefix_cache_stats().evictions, 0);
}

// A multi-turn chat: each turn's prompt is the previous turns plus the previous answer plus a new
// message; every turn after the first prefills only its new tokens.
TEST(PrefixCache, ChatTurnsPrefillOnlyWhatIsNew) {
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf");
  Engine eng(*m, options(true, 0));
  Engine cold(*m, options(false, 0));
  std::vector<int> conversation = random_tokens(12, 9);
  int64_t saved = 0;
  for (int turn = 0; turn < 10; ++turn) {
    Output o, x;
    eng.submit({conversation, sampled(uint64_t(turn), 5)}, collect(o));
    cold.submit({conversation, sampled(uint64_t(turn), 5)}, collect(x));
    eng.run_until_idle();
    cold.run_until_idle();
    EXPECT_EQ(o.logprobs, x.logprobs) << "turn " << turn;
    if (turn > 0) {
      // All but the new message and the previous answer's last token, which was sampled but
      // never fed (so the cache holds no position for it).
      EXPECT_EQ(o.final_event.cached_tokens, int64_t(conversation.size()) - 7 - 1) << "turn " << turn;
    }
    saved += o.final_event.cached_tokens;
    conversation.insert(conversation.end(), o.tokens.begin(), o.tokens.end());
    for (int t : random_tokens(7, 300 + uint32_t(turn))) conversation.push_back(t);
  }
  EXPECT_GT(saved, 0);
  EXPECT_EQ(eng.prefilled_tokens() + saved, cold.prefilled_tokens());
}

}  // namespace prefix_cache_test
}  // namespace g4
