// The cached paths (incremental decode, chunked prefill, continuous batching, int8 KV) against
// independent truth: the whole-sequence f32 reference run alone and unpadded, and the shared
// fixtures (llama.cpp logits, greedy continuations).
#include "engine/kv_cache.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/presets.h"
#include "model/synth.h"
#include "platform/error.h"
#include "engine/cache_feed.h"
#include "test_util.h"

namespace g4 {
namespace {

using test::max_abs_diff;
using test::feed_chunked;
using test::random_tokens;

struct Fixture {
  std::unique_ptr<Model> model;
  nlohmann::json expected;
  std::vector<float> logits, greedy_logits;
};

Fixture load_fixture(const std::string& variant) {
  const auto dir = test::fixtures_dir() / "gemma4-tiny" / variant;
  Fixture f;
  f.model = load_model(dir / "hf");
  f.expected = nlohmann::json::parse(test::read_file(dir / "expected.json"));
  f.logits = test::read_f32(dir / "expected_logits.f32");
  f.greedy_logits = test::read_f32(dir / "greedy_logits.f32");
  return f;
}

class CachedFixture : public ::testing::TestWithParam<std::string> {};

// One token at a time through the ring/block cache, far past the window (W = 8 here):
// every step equals the full-sequence reference (<= 1e-4) and the fixture (<= 1e-3).
TEST_P(CachedFixture, IncrementalDecodeEqualsReferenceAndFixture) {
  Fixture f = load_fixture(GetParam());
  const int64_t V = f.model->config.vocab_size;
  for (const auto& s : f.expected["sequences"]) {
    const auto tokens = s["tokens"].get<std::vector<int>>();
    KvCache kv(f.model->config, {KvDType::F32, 16, 4096});
    const int seq = kv.add_sequence();
    const auto inc = feed_chunked(*f.model, kv, seq, tokens, 1);
    const auto ref = forward_reference(*f.model, tokens);
    ASSERT_EQ(inc.size(), ref.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      EXPECT_LE(max_abs_diff(&inc[t * size_t(V)], &ref[t * size_t(V)], size_t(V)), 1e-4f) << s["name"] << " step " << t;
      const float* want = &f.logits[(s["row_offset"].get<size_t>() + t) * size_t(V)];
      EXPECT_LE(max_abs_diff(&inc[t * size_t(V)], want, size_t(V)), 1e-3f) << s["name"] << " step " << t;
    }
  }
}

// Greedy continuation through the cache reproduces the fixture's tokens and per-step logits.
TEST_P(CachedFixture, GreedyContinuationMatchesFixture) {
  Fixture f = load_fixture(GetParam());
  const int64_t V = f.model->config.vocab_size;
  const int n_greedy = f.expected["n_greedy"];
  size_t si = 0;
  for (const auto& s : f.expected["sequences"]) {
    const auto prompt = s["tokens"].get<std::vector<int>>();
    const auto want = s["greedy_tokens_llamacpp"].get<std::vector<int>>();
    KvCache kv(f.model->config);
    const int seq = kv.add_sequence();
    std::vector<BatchRow> rows;
    for (size_t t = 0; t < prompt.size(); ++t) rows.push_back({seq, int64_t(t), prompt[t], t + 1 == prompt.size()});
    auto logits = forward_cached(*f.model, rows, kv);  // the prompt in one step, logits for the last row
    for (int g = 0; g < n_greedy; ++g) {
      const float* ref_step = &f.greedy_logits[(si * size_t(n_greedy) + size_t(g)) * size_t(V)];
      EXPECT_LE(max_abs_diff(logits.data(), ref_step, size_t(V)), 1e-3f) << s["name"] << " greedy step " << g;
      const int tok = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(tok, want[size_t(g)]) << s["name"] << " greedy step " << g;
      logits = forward_cached(*f.model, {{seq, int64_t(prompt.size()) + g, want[size_t(g)], true}}, kv);
    }
    ++si;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, CachedFixture, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

class CachedSynth : public test::WindowedSynthSuite<CachedSynth> {};

// A window of 4 run for 300 tokens: the ring wraps 75 times; every step equals the reference.
TEST_F(CachedSynth, Window4For300TokensEqualsFullSequence) {
  for (const char* p : {"tiny-e", "tiny-31b"}) {
    auto m = model(p);
    const auto tokens = random_tokens(300, m->config.vocab_size, 11);
    const int64_t V = m->config.vocab_size;
    KvCache kv(m->config, {KvDType::F32, 32, 4096});
    const auto inc = feed_chunked(*m, kv, kv.add_sequence(), tokens, 1);
    const auto ref = forward_reference(*m, tokens);
    float worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) worst = std::max(worst, max_abs_diff(&inc[t * size_t(V)], &ref[t * size_t(V)], size_t(V)));
    EXPECT_LE(worst, 1e-4f) << p;
  }
}

// Chunked prefill equals one-shot: lengths not a multiple of the chunk, shorter than one chunk,
// and longer than the window; chunks larger than the ring too.
TEST_F(CachedSynth, ChunkedPrefillEqualsOneShot) {
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    auto m = model(p);
    const int64_t V = m->config.vocab_size;
    for (size_t len : {2u, 7u, 13u, 31u}) {
      const auto tokens = random_tokens(len, m->config.vocab_size, unsigned(len));
      const auto ref = forward_reference(*m, tokens);
      for (size_t chunk : {1u, 3u, 5u, 16u, 64u}) {
        KvCache kv(m->config, {KvDType::F32, 8, 4096});
        const auto got = feed_chunked(*m, kv, kv.add_sequence(), tokens, chunk);
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_LE(max_abs_diff(got.data(), ref.data(), got.size()), 1e-4f) << p << " len " << len << " chunk " << chunk;
        // The last row's logits, the ones sampling uses, come from the last chunk.
        EXPECT_LE(max_abs_diff(&got[(len - 1) * size_t(V)], &ref[(len - 1) * size_t(V)], size_t(V)), 1e-4f);
      }
    }
  }
}

// Sequences of different lengths decode together, join and leave between steps, each at its own
// positions; each one's logits equal running it alone through the reference.
TEST_F(CachedSynth, ContinuousBatchingEqualsEachSequenceAlone) {
  auto m = model("tiny-e");
  KvCache kv(m->config, {KvDType::F32, 4, 4096});
  std::vector<std::vector<int>> streams;
  for (size_t i = 0; i < 4; ++i) streams.push_back(random_tokens(9 + 7 * i, m->config.vocab_size, unsigned(100 + i)));
  // Sequence i joins at step 3i and prefills 3 tokens; then each decodes one per step, and leaves.
  const auto logits = test::feed_batched(
      *m, kv, streams, {}, [](size_t i, size_t fed, int step) -> size_t { return step < int(3 * i) ? 0 : fed == 0 ? 3 : 1; },
      true);
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto ref = forward_reference(*m, streams[i]);
    ASSERT_EQ(logits[i].size(), ref.size());
    EXPECT_LE(max_abs_diff(logits[i].data(), ref.data(), ref.size()), 1e-4f);
  }
  EXPECT_EQ(kv.bytes_in_use(), 0u);
}

TEST_F(CachedSynth, BatchContractViolationsAreRefused) {
  auto m = model("tiny-e");
  KvCache kv(m->config);
  const int a = kv.add_sequence();
  EXPECT_THROW(forward_cached(*m, {{a, 1, 5, true}}, kv), Error);                   // skips position 0
  EXPECT_THROW(forward_cached(*m, {{a, 0, 5, true}, {a, 2, 6, true}}, kv), Error);  // gap
  EXPECT_THROW(forward_cached(*m, {{a, 0, 9999, true}}, kv), Error);                // bad token
  EXPECT_THROW(forward_cached(*m, {{77, 0, 5, true}}, kv), Error);                  // unknown sequence
}

// Int8 K/V with a scale per (token, head): the logit error against the f32 cache is measured
// and bounded; bytes per token are about a quarter.
TEST_F(CachedSynth, Int8KvErrorIsBounded) {
  auto m = model("tiny-e");
  const auto tokens = random_tokens(40, m->config.vocab_size, 5);
  auto run = [&](KvDType t) {
    KvCache kv(m->config, {t, 8, 4096});
    return feed_chunked(*m, kv, kv.add_sequence(), tokens, 1);
  };
  const auto a = run(KvDType::F32), q8 = run(KvDType::Int8), h16 = run(KvDType::F16), b16 = run(KvDType::BF16);
  auto mean_abs = [&](const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / double(a.size());
  };
  const float err = max_abs_diff(a.data(), q8.data(), a.size());
  std::printf("[ kv dtype ] max |delta logit| vs f32 cache, 40 steps, tiny-e (head_dim 16/32): int8 %.4g (mean %.3g), "
              "bf16 %.4g (mean %.3g), f16 %.4g (mean %.3g)\n", err, mean_abs(q8),
              max_abs_diff(a.data(), b16.data(), a.size()), mean_abs(b16), max_abs_diff(a.data(), h16.data(), a.size()),
              mean_abs(h16));
  EXPECT_GT(err, 0.0f);  // it really is quantized
  // Logits here have a std of about 3; int8 with a per-(token, head) scale must stay within 0.6
  // worst case and 0.05 on average (measured: see the line printed above).
  EXPECT_LT(err, 0.6f);
  EXPECT_LT(mean_abs(q8), 0.05);
  const auto f = kv_footprint(m->config, KvDType::F32), q = kv_footprint(m->config, KvDType::Int8);
  EXPECT_LT(q.bytes_per_token * 3, f.bytes_per_token);
}

TEST(KvFootprint, E2bIs18KiBPerTokenIn16Bit) {
  ModelConfig e2b = preset_config("e2b");
  const auto f = kv_footprint(e2b, KvDType::BF16);
  EXPECT_EQ(f.bytes_per_token, 18u * 1024u);
  // E4B: 56 KiB.
  EXPECT_EQ(kv_footprint(preset_config("e4b"), KvDType::F16).bytes_per_token, 56u * 1024u);
  // The sliding layers' share stops growing past the window.
  const uint64_t at_w = f.bytes_at(512, 512), at_4w = f.bytes_at(2048, 512);
  EXPECT_EQ(at_4w - at_w, f.full_bytes_per_token * (2048 - 512));
  EXPECT_EQ(f.sliding_bytes_per_token * 512, f.bytes_at(4096, 512) - f.full_bytes_per_token * 4096);
}

TEST(KvCacheBlocks, AllocatesOnDemandAndRefusesWhenFull) {
  ModelConfig c = preset_config("tiny-31b");
  KvCache kv(c, {KvDType::F32, 4, 16});  // 4 blocks per full layer
  const int a = kv.add_sequence();
  EXPECT_EQ(kv.free_blocks(), 4);
  EXPECT_TRUE(kv.can_grow(a, 16));
  EXPECT_FALSE(kv.can_grow(a, 17));
  std::vector<float> row(64 * 4, 1.0f);
  kv.write(3, a, 0, 5, row.data(), row.data());  // 5 positions -> 2 blocks
  EXPECT_EQ(kv.free_blocks(), 2);
  kv.free_sequence(a);
  EXPECT_EQ(kv.free_blocks(), 4);
}

// A fork shares the blocks wholly below its length and copies the one it falls in: one block
// taken, not three; writes past the length land in its own blocks and leave the original alone;
// a shared block outlives the sequence that made it; nothing leaks once all are freed.
TEST(KvCacheBlocks, ForksShareWholeBlocksAndCopyThePartOne) {
  ModelConfig c = preset_config("tiny-31b");
  const int layer = 3;  // a full layer
  ASSERT_EQ(c.layers[layer].type, LayerType::Full);
  const int64_t w = int64_t(c.layers[layer].kv_heads) * c.layers[layer].head_dim;
  KvCache kv(c, {KvDType::F32, 4, 64});  // 16 blocks per full layer
  const int a = kv.add_sequence();
  std::vector<float> rows(size_t(10 * w));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = float(i);
  for (size_t l = 0; l < c.layers.size(); ++l)
    if (!c.layers[l].kv_shared) kv.write(int(l), a, 0, 10, rows.data(), rows.data());
  kv.commit(a, 10);  // blocks 0, 1 whole; block 2 holds positions 8, 9
  EXPECT_EQ(kv.free_blocks(), 13);
  const uint64_t before = kv.bytes_in_use();
  const int b = kv.fork_sequence(a);
  EXPECT_EQ(kv.free_blocks(), 12) << "only the part-filled block is copied";
  EXPECT_LT(kv.bytes_in_use(), 2 * before);
  std::vector<float> other(size_t(2 * w), -7.0f);
  kv.write(layer, b, 10, 2, other.data(), other.data());  // into b's own copy of block 2
  kv.commit(b, 12);
  std::vector<float> k(size_t(12 * w)), v(size_t(12 * w));
  kv.read(layer, a, 0, 10, k.data(), v.data());
  EXPECT_TRUE(std::equal(k.begin(), k.begin() + 10 * w, rows.begin())) << "the original is untouched";
  kv.free_sequence(a);  // b still holds the shared blocks
  kv.read(layer, b, 0, 12, k.data(), v.data());
  EXPECT_TRUE(std::equal(k.begin(), k.begin() + 10 * w, rows.begin()));
  EXPECT_EQ(k[size_t(10 * w)], -7.0f);
  kv.free_sequence(b);
  EXPECT_EQ(kv.free_blocks(), 16);
  EXPECT_EQ(kv.bytes_in_use(), 0u);
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// The cached forward on SIMD kernels against the fixture logits (independent truth) and against
// the reference loops run through the same cache.
TEST(CachedFast, SimdKernelsMatchFixtureLogits) {
  ThreadPool pool(2);
  ops::MatmulContext mm{&pool, 4};
  blocks::Exec fast{&mm};
  for (const char* v : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    Fixture f = load_fixture(v);
    const int64_t V = f.model->config.vocab_size;
    for (const auto& s : f.expected["sequences"]) {
      const auto tokens = s["tokens"].get<std::vector<int>>();
      KvCache kv(f.model->config);
      const auto got = feed_chunked(*f.model, kv, kv.add_sequence(), tokens, 6, fast);  // chunked prefill, chunk 6
      const auto ref = forward_reference(*f.model, tokens);
      const float* want = &f.logits[s["row_offset"].get<size_t>() * size_t(V)];
      EXPECT_LE(max_abs_diff(got.data(), want, got.size()), 1e-3f) << v << " " << s["name"];
      EXPECT_LE(max_abs_diff(got.data(), ref.data(), got.size()), 1e-4f) << v << " " << s["name"];
    }
  }
}

}  // namespace
}  // namespace g4
