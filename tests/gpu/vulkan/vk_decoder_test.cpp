// The Gemma 4 decoder on the first Vulkan device (lavapipe in CI) on the shared tiny fixtures:
// against g4's f32 reference forward (model/forward_reference.h) and the fixtures' expected
// logits (llama.cpp with exact GELU), one-shot and one token per step through the GPU KV buffers.
// Skips, saying why, where no loader or device is present.
#include "gpu/vulkan/vk_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

#include "gpu_model/gemma4_gpu.h"
#include "model/forward_reference.h"
#include "model/model.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "test_util.h"
#include "vk_decoder_fixtures.h"
#include "vk_test_session.h"

namespace g4::gpu {
namespace {

using vk_test::argmax_row;
using vk_test::kRelBound;
using vk_test::max_abs;
using vk_test::Sequence;
using vk_test::sequences;
constexpr float kFixtureBound = 1e-3f;  // the fixtures' README, for f32 weights and math

class GpuDecoderFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = g4::test::fixtures_dir() / "gemma4-tiny" / GetParam();
    model_ = load_model(dir_ / "hf");
    seqs_ = sequences(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<Model> model_;
  std::vector<Sequence> seqs_;
};

// Every sequence in one step from position 0: the whole stack in one command buffer.
TEST_P(GpuDecoderFixture, OneShotMatchesReferenceAndFixture) {
  OPEN_OR_SKIP(s);
  GpuDecoder dec(*s, gpu_decoder_spec(*model_), {128, 100});
  const size_t V = size_t(model_->config.vocab_size);
  const auto expected = g4::test::read_f32(dir_ / "expected_logits.f32");
  float worst_ref = 0, worst_rel = 0, worst_fixture = 0;
  double device_s = 0;  // the longest sequence's step, by timestamps
  uint32_t dispatches = 0;
  for (const Sequence& q : seqs_) {
    dec.reset();
    const GpuStepResult r = dec.step(q.tokens);
    EXPECT_EQ(r.submissions, 1u);
    dispatches = r.dispatches;
    EXPECT_GT(r.dispatches, uint32_t(model_->config.num_hidden_layers) * 15);
    if (s->info().timestamps) {
      ASSERT_TRUE(r.device_seconds.has_value());
      EXPECT_GT(*r.device_seconds, 0.0);
      device_s = *r.device_seconds;
    }
    const std::vector<float> want = forward_reference(*model_, q.tokens);
    ASSERT_EQ(r.logits.size(), want.size());
    const float d = g4::test::max_abs_diff(r.logits.data(), want.data(), want.size());
    worst_ref = std::max(worst_ref, d);
    worst_rel = std::max(worst_rel, d / max_abs(want));
    EXPECT_LE(d, kRelBound * max_abs(want)) << q.name;
    for (size_t t = 0; t < q.tokens.size(); ++t) {
      const float* got = &r.logits[t * V];
      const float* fix = &expected[(q.row_offset + t) * V];
      worst_fixture = std::max(worst_fixture, g4::test::max_abs_diff(got, fix, V));
      EXPECT_EQ(argmax_row(got, V), argmax_row(fix, V)) << q.name << " position " << t;
    }
    EXPECT_EQ(dec.position(), int64_t(q.tokens.size()));
  }
  EXPECT_LE(worst_fixture, kFixtureBound);
  std::printf("[ gpu ] %s on %s: max |d| vs reference %.3g (relative %.3g), vs fixture %.3g; %zu-token step %.3f s, %u dispatches\n",
              GetParam().c_str(), s->info().name.c_str(), worst_ref, worst_rel, worst_fixture, seqs_.back().tokens.size(),
              device_s, dispatches);
}

// The 40-token sequence (longer than twice the window) through the KV buffers in pieces:
// - a 5-token prefill, then one token per step: every row must equal the one-shot forward's;
// - steps of exactly max_step (5) tokens: the sliding rings of 8 - 1 + 5 = 12 slots wrap, and
//   each step's first query still reads the 7 keys before it, so one slot fewer would break it.
TEST_P(GpuDecoderFixture, IncrementalDecodeEqualsOneShot) {
  OPEN_OR_SKIP(s);
  const size_t V = size_t(model_->config.vocab_size);
  const Sequence& q = seqs_[1];
  ASSERT_GT(q.tokens.size(), size_t(2 * model_->config.sliding_window));
  GpuDecoder whole(*s, gpu_decoder_spec(*model_), {64, 64});
  const std::vector<float> one_shot = whole.step(q.tokens).logits;
  GpuDecoder dec(*s, gpu_decoder_spec(*model_), {64, 5});
  const size_t prefill = 5;
  std::vector<float> rows = dec.step({q.tokens.begin(), q.tokens.begin() + prefill}).logits;
  for (size_t t = prefill; t < q.tokens.size(); ++t) {
    const GpuStepResult r = dec.step({q.tokens[t]});
    EXPECT_EQ(r.submissions, 1u);
    rows.insert(rows.end(), r.logits.begin(), r.logits.end());
  }
  ASSERT_EQ(rows.size(), one_shot.size());
  const float d = g4::test::max_abs_diff(rows.data(), one_shot.data(), rows.size());
  EXPECT_LE(d, kRelBound * max_abs(one_shot));
  const auto expected = g4::test::read_f32(dir_ / "expected_logits.f32");
  const float fx = g4::test::max_abs_diff(rows.data(), &expected[q.row_offset * V], rows.size());
  EXPECT_LE(fx, kFixtureBound);
  dec.reset();
  std::vector<float> chunked;
  for (size_t t = 0; t < q.tokens.size(); t += 5) {
    const auto r = dec.step({q.tokens.begin() + long(t), q.tokens.begin() + long(std::min(t + 5, q.tokens.size()))});
    chunked.insert(chunked.end(), r.logits.begin(), r.logits.end());
  }
  ASSERT_EQ(chunked.size(), one_shot.size());
  const float dc = g4::test::max_abs_diff(chunked.data(), one_shot.data(), chunked.size());
  EXPECT_LE(dc, kRelBound * max_abs(one_shot));
  std::printf("[ gpu ] %s vs one-shot max |d|: one token per step %.3g, steps of 5 %.3g; vs fixture %.3g\n",
              GetParam().c_str(), d, dc, fx);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GpuDecoderFixture, ::testing::Values("tiny-31b", "tiny-e", "tiny-moe"));

// Every matrix of tiny-31b re-encoded as bf16 words (the tied head and embedding included): the
// matmul and gather shaders widen them, against forward_reference on the same rounded weights.
TEST(GpuDecoder, Bf16WordsMatchReferenceOnTheSameWeights) {
  OPEN_OR_SKIP(s);
  auto model = load_model(g4::test::fixtures_dir() / "gemma4-tiny" / "tiny-31b" / "hf");
  std::deque<std::vector<uint16_t>> words;  // the bf16 data the new views point at
  for (const TensorView** slot : streamed_matrices(model->weights)) {
    const TensorView& f = **slot;
    std::vector<uint16_t>& w = words.emplace_back(size_t(f.numel()));
    for (int64_t i = 0; i < f.numel(); ++i) w[size_t(i)] = f32_to_bf16(f.at(i));
    TensorView v = f;
    v.dtype = DType::BF16;
    v.data = reinterpret_cast<const std::byte*>(w.data());
    v.nbytes = w.size() * 2;
    model->replace_view(slot, v);
  }
  ASSERT_EQ(model->weights.embed_tokens->dtype, DType::BF16);  // tied: the gather reads the words too
  GpuDecoder dec(*s, gpu_decoder_spec(*model), {64, 64});
  const std::vector<int> tokens = sequences(g4::test::fixtures_dir() / "gemma4-tiny" / "tiny-31b")[1].tokens;
  const std::vector<float> got = dec.step(tokens).logits, want = forward_reference(*model, tokens);
  const float d = g4::test::max_abs_diff(got.data(), want.data(), want.size());
  EXPECT_LE(d, kRelBound * max_abs(want));
  std::printf("[ gpu ] tiny-31b as bf16 words: max |d| vs reference %.3g\n", d);
}

TEST(GpuDecoder, RefusesBadSteps) {
  OPEN_OR_SKIP(s);
  auto model = load_model(g4::test::fixtures_dir() / "gemma4-tiny" / "tiny-31b" / "hf");
  GpuDecoder dec(*s, gpu_decoder_spec(*model), {6, 4});
  EXPECT_THROW(dec.step({}), Error);
  EXPECT_THROW(dec.step({5, 6, 7, 8, 9}), Error);        // over max_step
  EXPECT_THROW(dec.step({model->config.vocab_size}), Error);  // outside the vocabulary
  EXPECT_EQ(dec.position(), 0);
  dec.step({5, 6, 7, 8});
  try {
    dec.step({5, 6, 7});  // positions 4..6 past max_context 6
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_context 6"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dec.position(), 4);
}

}  // namespace
}  // namespace g4::gpu
