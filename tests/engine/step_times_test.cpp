// blocks::StepTimes, the wall time a forward pass spends in its weight products and in its
// attention (g4 bench's breakdown of a decoded token): timing changes no bit of the logits, both
// parts are counted, and together they never exceed the steps' own wall time (clocked outside).
#include <gtest/gtest.h>

#include <chrono>

#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

// Decode steps of a fixture model, on the SIMD kernels and on the reference loops.
TEST(StepTimes, ChangeNoBitCountBothPartsAndStayWithinTheStepsWallTime) {
  const auto model = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf");
  const std::vector<int> tokens = test::random_tokens(24, int(model->config.vocab_size), 7);
  ThreadPool pool(2);
  ops::MatmulContext mm{&pool, 4};
  for (const bool simd : {true, false}) {
    blocks::Exec plain;
    if (simd) plain.matmul = &mm;
    KvCache kv_plain(model->config), kv_timed(model->config);
    const int s_plain = kv_plain.add_sequence(), s_timed = kv_timed.add_sequence();
    blocks::StepTimes st;
    blocks::Exec timed = plain;
    timed.times = &st;
    double wall = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::vector<BatchRow> rows{{0, int64_t(t), tokens[t], true}};
      std::vector<BatchRow> a = rows, b = rows;
      a[0].seq = s_plain;
      b[0].seq = s_timed;
      const auto want = forward_cached(*model, a, kv_plain, plain);
      const auto t0 = std::chrono::steady_clock::now();
      const auto got = forward_cached(*model, b, kv_timed, timed);
      wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_EQ(got, want) << (simd ? "simd" : "reference") << " step " << t;
    }
    EXPECT_GT(st.weight_products_s, 0.0) << simd;
    EXPECT_GT(st.attention_s, 0.0) << simd;
    EXPECT_LE(st.weight_products_s + st.attention_s, wall) << simd;
  }
}

}  // namespace
}  // namespace g4
