// --compute f16 on the first Vulkan device (lavapipe in CI): the decoder with its weight products
// multiplied in f16 and summed in f32 (GpuDecoderLimits::compute_f16, src/gpu/shaders/product.glsl)
// on every tiny fixture, against the fixtures' expected logits. Its documented bound
// (docs/numerics.md) holds, the greedy token agrees wherever the fixture's top-1/top-2 margin
// leaves room for it, and it is further from the fixture than the f32 path: the f16 variants
// really ran. Skips, saying why, where no device or no shaderFloat16 is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "gpu/gpu_policy.h"
#include "gpu/vulkan/vk_decoder.h"
#include "gpu_model/gemma4_gpu.h"
#include "model/model.h"
#include "test_util.h"
#include "vk_decoder_fixtures.h"
#include "vk_test_session.h"

namespace g4::gpu {
namespace {

using vk_test::Sequence;
using vk_test::sequences;

// Max |logit - expected| for f16 compute (docs/numerics.md): about 2.7x the largest measured on
// lavapipe over the three fixtures' 145 rows each (tiny-e, 0.075; tiny-31b 0.038, tiny-moe
// 0.027), about 1.5% of the largest logit (13).
constexpr float kF16Bound = 0.2f;

// The two largest logits of a row, minus each other.
float top_margin(const float* row, size_t V) {
  float a = -1e30f, b = -1e30f;
  for (size_t i = 0; i < V; ++i) {
    if (row[i] > a) b = a, a = row[i];
    else if (row[i] > b) b = row[i];
  }
  return a - b;
}

// The fixture GetParam() names, on a device with f16 compute (skipped, saying why, without).
class GpuF16Compute : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    s_ = vk_test::session_or_skip_reason(why);
    if (!s_) GTEST_SKIP() << "no Vulkan device (" << why << ")";
    if (!s_->info().shader_float16 || !s_->info().storage_16bit)
      GTEST_SKIP() << s_->info().name << " lacks shaderFloat16 or 16-bit storage: no f16 compute";
    dir_ = g4::test::fixtures_dir() / "gemma4-tiny" / GetParam();
    model_ = load_model(dir_ / "hf");
  }
  const VulkanSession* s_ = nullptr;
  std::filesystem::path dir_;
  std::unique_ptr<Model> model_;
};

TEST_P(GpuF16Compute, WithinItsBoundOfTheFixtureAndFurtherThanF32) {
  const VulkanSession* s = s_;
  const auto& dir = dir_;
  const auto& model = model_;
  const size_t V = size_t(model->config.vocab_size);
  const auto expected = g4::test::read_f32(dir / "expected_logits.f32");
  GpuDecoderLimits half{128, 100};
  half.compute_f16 = true;
  GpuDecoder f32(*s, gpu_decoder_spec(*model), {128, 100}), f16(*s, gpu_decoder_spec(*model), half);
  float worst32 = 0, worst16 = 0;
  int checked = 0, rows = 0;
  for (const Sequence& q : sequences(dir)) {
    f32.reset(), f16.reset();
    const std::vector<float> a = f32.step(q.tokens).logits, h = f16.step(q.tokens).logits;
    for (size_t t = 0; t < q.tokens.size(); ++t, ++rows) {
      const float* fix = &expected[(q.row_offset + t) * V];
      worst32 = std::max(worst32, g4::test::max_abs_diff(&a[t * V], fix, V));
      worst16 = std::max(worst16, g4::test::max_abs_diff(&h[t * V], fix, V));
      // Each logit within the bound of the fixture's: the top two can only swap when their
      // margin is under twice the bound.
      if (top_margin(fix, V) > 2 * kF16Bound) {
        ++checked;
        EXPECT_EQ(vk_test::argmax_row(&h[t * V], V), vk_test::argmax_row(fix, V)) << q.name << " position " << t;
      }
    }
  }
  EXPECT_LE(worst16, kF16Bound);
  // The f16 products moved the logits well past the f32 path's distance (2-3e-5): a build that
  // ran the f32 pipelines, or multiplied in f32 inside the f16 variants, stays there.
  EXPECT_GT(worst16, 10 * worst32);
  EXPECT_GT(checked, rows / 2);  // the check has rows to bite on
  std::printf("[ gpu ] %s on %s, max |d| vs fixture: f32 compute %.3g, f16 compute %.3g (bound %.3g); argmax checked "
              "on %d of %d rows\n",
              GetParam().c_str(), s->info().name.c_str(), worst32, worst16, kF16Bound, checked, rows);
}

// One-shot (the tiled matmul) and steps of 8 rows (gemv.comp) give the same f16-compute bits:
// the two COMPUTE_F16 variants make the same products in the same order.
TEST_P(GpuF16Compute, StepsOfAFewRowsGiveTheOneShotBits) {
  const VulkanSession* s = s_;
  const auto& model = model_;
  const Sequence q = sequences(dir_)[1];
  GpuDecoderLimits whole{64, 64}, steps{64, 8};
  whole.compute_f16 = steps.compute_f16 = true;
  GpuDecoder one(*s, gpu_decoder_spec(*model), whole), dec(*s, gpu_decoder_spec(*model), steps);
  const std::vector<float> one_shot = one.step(q.tokens).logits;
  std::vector<float> stepped;
  for (size_t t = 0; t < q.tokens.size(); t += 8) {
    const auto r = dec.step({q.tokens.begin() + long(t), q.tokens.begin() + long(std::min(t + 8, q.tokens.size()))});
    stepped.insert(stepped.end(), r.logits.begin(), r.logits.end());
  }
  ASSERT_EQ(stepped.size(), one_shot.size());
  EXPECT_EQ(0, std::memcmp(stepped.data(), one_shot.data(), one_shot.size() * sizeof(float)))
      << "max |d| " << g4::test::max_abs_diff(stepped.data(), one_shot.data(), one_shot.size());
}

// A G4_VULKAN build carries the f16-product shaders, so the policy grants --compute f16 on a
// device that reports shaderFloat16 and 16-bit storage (and only on request).
TEST(GpuF16Policy, ThisBuildHasTheF16ProductShaders) {
  EXPECT_TRUE(built_shaders().f16_arithmetic);
  OPEN_OR_SKIP(s);
  if (!s->info().shader_float16 || !s->info().storage_16bit) GTEST_SKIP() << s->info().name << ": no f16 compute";
  EXPECT_EQ(resolve_gpu_policy(s->info(), NumFormat::F32, NumFormat::F16).compute, NumFormat::F16);
  EXPECT_EQ(resolve_gpu_policy(s->info(), NumFormat::F16).compute, NumFormat::F32);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuF16Compute, ::testing::Values("tiny-31b", "tiny-e", "tiny-moe"));

}  // namespace
}  // namespace g4::gpu
