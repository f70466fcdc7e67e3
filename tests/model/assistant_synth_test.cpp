// `g4 synth`'s drafter presets: a random tiny-assistant loads against a random tiny-e and drafts,
// and the E2B assistant's geometry pairs with the E2B target's as the released pair does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/dense_kv_store.h"
#include "model/assistant_step.h"
#include "model/forward_cached.h"
#include "model/presets.h"
#include "model/synth.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(AssistantSynth, TinyAssistantLoadsAndDraftsForTinyE) {
  test::TempDir tmp;
  const SynthOptions o;
  write_synth_checkpoint(preset_config("tiny-e"), o, tmp / "target");
  write_synth_assistant(preset_assistant_config("tiny-assistant"), o, tmp / "drafter");
  auto target = load_model(tmp / "target");
  auto d = load_assistant(tmp / "drafter", *target);
  DenseKvStore kv(target->config);
  const int seq = kv.add_sequence();
  const auto tokens = test::random_tokens(21, 512, 3);
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < 20; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == 19});
  std::vector<float> logits, hidden;
  forward_cached(*target, rows, kv, {}, logits, &hidden);
  const auto steps = draft(*d, *target, kv, seq, 20, tokens[20], hidden, 3);  // past the window of 8
  ASSERT_EQ(steps.size(), 3u);
  for (const DraftStep& s : steps) {
    ASSERT_EQ(s.logits.size(), 512u);
    ASSERT_EQ(s.candidates.size(), 4u * 16u);
    for (float v : s.logits) ASSERT_TRUE(std::isfinite(v));
    for (float v : s.h_next) ASSERT_TRUE(std::isfinite(v));
    EXPECT_NE(std::find(s.candidates.begin(), s.candidates.end(), s.token), s.candidates.end());
  }
}

// bf16 weights, as released checkpoints ship them: the SIMD kernels (f32 activations) draft what
// the reference loops draft, to summation order.
TEST(AssistantSynth, Bf16PairDraftsTheSameOnTheSimdKernels) {
  test::TempDir tmp;
  SynthOptions o;
  o.dtype = DType::BF16;
  write_synth_checkpoint(preset_config("tiny-e"), o, tmp / "target");
  write_synth_assistant(preset_assistant_config("tiny-assistant"), o, tmp / "drafter");
  auto target = load_model(tmp / "target");
  auto d = load_assistant(tmp / "drafter", *target);
  ThreadPool pool(2);
  const ops::MatmulContext mm = ops::make_matmul_context(
      &pool, host_cpu(), std::max(target->config.widest_matmul_input(), d->config.widest_matmul_input()), false, false);
  blocks::Exec simd;
  simd.matmul = &mm;
  const auto tokens = test::random_tokens(15, 512, 5);
  std::vector<std::vector<DraftStep>> runs;
  for (const blocks::Exec& ex : {simd, blocks::Exec{}}) {  // SIMD, then the reference loops
    DenseKvStore kv(target->config);
    const int seq = kv.add_sequence();
    std::vector<BatchRow> rows;
    for (int64_t t = 0; t < 14; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == 13});
    std::vector<float> logits, hidden;
    forward_cached(*target, rows, kv, ex, logits, &hidden);
    runs.push_back(draft(*d, *target, kv, seq, 14, tokens[14], hidden, 3, ex));
  }
  float worst = 0;
  for (size_t j = 0; j < 3; ++j) {
    worst = std::max(worst, test::max_abs_diff(runs[0][j].logits.data(), runs[1][j].logits.data(), 512));
    EXPECT_EQ(runs[0][j].candidates, runs[1][j].candidates) << "step " << j + 1;
  }
  EXPECT_LE(worst, 1e-3f);
  std::printf("[ assistant ] bf16 weights, SIMD vs reference loops: max |delta| = %.3g\n", worst);
}

// The E4B pair: 42 layers in a 5:1 pattern, the first KV-shared one 24, so the drafter reads the
// last sliding (22) and full (23) layers below it; the E2B drafter is refused for E4B by name.
TEST(AssistantSynth, E4bAssistantPairsWithE4bAtLayers22And23) {
  const AssistantPairing p = pair_assistant(preset_assistant_config("e4b-assistant"), preset_config("e4b"), "d", "t");
  EXPECT_EQ(p.sliding_layer, 22);
  EXPECT_EQ(p.full_layer, 23);
  EXPECT_THROW(pair_assistant(preset_assistant_config("e2b-assistant"), preset_config("e4b"), "d", "t"), Error);
}

// The released E2B pair: the drafter reads layers 13 (sliding) and 14 (full), the last layers
// below the first KV-shared one (15).
TEST(AssistantSynth, E2bAssistantPairsWithE2bAtLayers13And14) {
  const AssistantPairing p = pair_assistant(preset_assistant_config("e2b-assistant"), preset_config("e2b"), "d", "t");
  EXPECT_EQ(p.sliding_layer, 13);
  EXPECT_EQ(p.full_layer, 14);
  try {
    pair_assistant(preset_assistant_config("e2b-assistant"), preset_config("31b"), "d", "t");
    ADD_FAILURE() << "the E2B drafter paired with the 31B";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d is not a drafter for t: drafter backbone_hidden_size = 1536 but target "
                                         "hidden_size = 5376"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace g4
