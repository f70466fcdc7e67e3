// Speculative rollback in the KV cache: positions written for drafts and then forgotten
// (KvCache::truncate) must leave the cache exactly as if only the accepted tokens had been fed.
// Truth: the same tokens fed one at a time (plain decode), bit for bit, and the f32 reference.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/cache_feed.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/presets.h"
#include "model/synth.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

class KvRollback : public test::WindowedSynthSuite<KvRollback> {};

// Feeds `tokens` the way verification does: each step the true next token plus k drafts, of
// which the first `a` are the true continuation and the rest wrong; keeps the a + 1 valid rows'
// logits and rolls the cache back past the wrong ones. Logits [tokens, V].
std::vector<float> feed_with_rollbacks(const Model& m, KvCache& kv, int seq, const std::vector<int>& tokens, int k_max,
                                       const blocks::Exec& ex, unsigned seed) {
  const int64_t V = m.config.vocab_size;
  std::mt19937 rng(seed);
  std::vector<float> out, l;
  for (size_t p = 0; p < tokens.size();) {
    const int k = int(rng() % unsigned(k_max + 1));
    const int a = std::min<int>(int(rng() % unsigned(k + 1)), int(tokens.size() - p - 1));
    std::vector<BatchRow> rows{{seq, int64_t(p), tokens[p], true}};
    for (int j = 1; j <= k; ++j) {
      int t = j <= a ? tokens[p + size_t(j)] : int(rng() % unsigned(V));
      if (j == a + 1 && p + size_t(j) < tokens.size() && t == tokens[p + size_t(j)]) t = (t + 1) % int(V);  // really wrong
      rows.push_back({seq, int64_t(p) + j, t, true});
    }
    forward_cached(m, rows, kv, ex, l);
    out.insert(out.end(), l.begin(), l.begin() + ptrdiff_t(size_t(a + 1) * size_t(V)));
    p += size_t(a + 1);
    kv.truncate(seq, int64_t(p));
  }
  return out;
}

// Windows of 4 over 100 tokens (the rings wrap through every rollback length 0..6): the kept
// rows equal plain decode bit for bit, on the reference loops and on the SIMD kernels.
TEST_F(KvRollback, RollbacksEqualPlainDecodeBitForBit) {
  ThreadPool pool(2);
  ops::MatmulContext mm{&pool, 4};
  for (const char* p : {"tiny-e", "tiny-31b"}) {
    auto m = model(p);
    const auto tokens = test::random_tokens(100, m->config.vocab_size, 5);
    for (const blocks::Exec ex : {blocks::Exec{}, blocks::Exec{&mm}}) {
      KvCache plain_kv(m->config, {KvDType::F32, 8, 4096});
      const auto plain = test::feed_chunked(*m, plain_kv, plain_kv.add_sequence(), tokens, 1, ex);
      KvCacheOptions o{KvDType::F32, 8, 4096};
      o.ring_extra_slots = 6;
      KvCache kv(m->config, o);
      const auto spec = feed_with_rollbacks(*m, kv, kv.add_sequence(), tokens, 6, ex, 9);
      ASSERT_EQ(spec.size(), plain.size());
      EXPECT_EQ(std::memcmp(spec.data(), plain.data(), spec.size() * sizeof(float)), 0) << p << (ex.matmul ? " simd" : " ref");
      const auto ref = forward_reference(*m, tokens);
      EXPECT_LE(test::max_abs_diff(spec.data(), ref.data(), ref.size()), 1e-4f) << p;
    }
  }
}

// The int8 and f16 caches roll back the same way (their rows are quantized per position). The
// SIMD pass treats a step's own rows as the cache will store them, so chunking changes no bit
// there (the reference loops keep those rows f32: docs/numerics.md).
TEST_F(KvRollback, QuantizedCachesRollBackExactly) {
  ThreadPool pool(2);
  ops::MatmulContext mm{&pool, 4};
  const blocks::Exec ex{&mm};
  auto m = model("tiny-e");
  const auto tokens = test::random_tokens(60, m->config.vocab_size, 6);
  for (KvDType d : {KvDType::F16, KvDType::Int8}) {
    KvCache plain_kv(m->config, {d, 8, 4096});
    const auto plain = test::feed_chunked(*m, plain_kv, plain_kv.add_sequence(), tokens, 1, ex);
    KvCacheOptions o{d, 8, 4096};
    o.ring_extra_slots = 4;
    KvCache kv(m->config, o);
    const auto spec = feed_with_rollbacks(*m, kv, kv.add_sequence(), tokens, 4, ex, 3);
    EXPECT_EQ(std::memcmp(spec.data(), plain.data(), spec.size() * sizeof(float)), 0) << int(d);
  }
}

// A fork shares whole blocks; rolling the fork back into a shared block gives it a private copy,
// so what the fork writes next never reaches the original. History rolls back too, so a prefix
// restored afterwards holds the accepted tokens only.
TEST_F(KvRollback, ForkedAndHistoryBlocksStayIntact) {
  auto m = model("tiny-e");
  const int64_t V = m->config.vocab_size;
  const auto a_tokens = test::random_tokens(48, V, 7);
  KvCacheOptions o{KvDType::F32, 8, 4096};
  o.ring_extra_slots = 4;
  KvCache kv(m->config, o);
  const int a = kv.add_sequence(/*history=*/true);
  test::feed_chunked(*m, kv, a, std::vector<int>(a_tokens.begin(), a_tokens.begin() + 40), 40);
  const int b = kv.fork_sequence(a);  // 40 = 5 whole blocks, all shared
  kv.truncate(b, 37);
  auto b_tokens = std::vector<int>(a_tokens.begin(), a_tokens.begin() + 37);
  for (int t : test::random_tokens(6, V, 8)) b_tokens.push_back(t);
  std::vector<BatchRow> rows;
  for (size_t p = 37; p < b_tokens.size(); ++p) rows.push_back({b, int64_t(p), b_tokens[p], true});
  const auto b_logits = forward_cached(*m, rows, kv);
  const auto b_ref = forward_reference(*m, b_tokens);
  EXPECT_LE(test::max_abs_diff(b_logits.data(), &b_ref[37 * size_t(V)], b_logits.size()), 1e-4f);
  // The original continues as if the fork never existed.
  rows.clear();
  for (size_t p = 40; p < a_tokens.size(); ++p) rows.push_back({a, int64_t(p), a_tokens[p], true});
  const auto a_logits = forward_cached(*m, rows, kv);
  const auto a_ref = forward_reference(*m, a_tokens);
  EXPECT_LE(test::max_abs_diff(a_logits.data(), &a_ref[40 * size_t(V)], a_logits.size()), 1e-4f);
  // Roll the original back and restore a prefix from its history: the accepted tokens only.
  kv.truncate(a, 45);
  const int r = kv.restore_prefix(a, 44);
  rows = {{r, 44, 3, true}};
  auto cut = std::vector<int>(a_tokens.begin(), a_tokens.begin() + 44);
  cut.push_back(3);
  const auto r_logits = forward_cached(*m, rows, kv);
  const auto r_ref = forward_reference(*m, cut);
  EXPECT_LE(test::max_abs_diff(r_logits.data(), &r_ref[44 * size_t(V)], r_logits.size()), 1e-4f);
}

TEST_F(KvRollback, RefusesRollbacksTheRingsCannotHold) {
  auto m = model("tiny-e");
  KvCacheOptions o{KvDType::F32, 8, 4096};
  o.ring_extra_slots = 2;
  KvCache kv(m->config, o);
  const int s = kv.add_sequence();
  test::feed_chunked(*m, kv, s, test::random_tokens(20, m->config.vocab_size, 1), 20);
  EXPECT_THROW(kv.truncate(s, 17), Error);  // 3 back, 2 extra slots
  EXPECT_THROW(kv.truncate(s, 21), Error);
  EXPECT_THROW(kv.truncate(s, -1), Error);
  kv.truncate(s, 18);
  EXPECT_EQ(kv.length(s), 18);
  KvCache plain(m->config, {KvDType::F32, 8, 4096});
  const int q = plain.add_sequence();
  test::feed_chunked(*m, plain, q, test::random_tokens(20, m->config.vocab_size, 1), 20);
  EXPECT_THROW(plain.truncate(q, 19), Error);  // no extra slots: no rollback at all
}

}  // namespace
}  // namespace g4
