// The shared fixtures' model.gguf (llama.cpp's converter, F32): same config, same weights and
// the same logits as the hf/ directories, full-sequence and incremental through the KV cache.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "model/forward_reference.h"
#include "model/model.h"
#include "test_util.h"

namespace g4 {
namespace {

class GgufFixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::filesystem::path dir() const { return test::fixtures_dir() / "gemma4-tiny" / GetParam(); }
};

TEST_P(GgufFixture, ConfigMatchesHfConfig) {
  auto g = load_model(dir() / "model.gguf");
  auto h = load_model(dir() / "hf");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(g->format, "gguf");
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.global_head_dim, b.global_head_dim);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.layer_types, b.layer_types);
  EXPECT_EQ(a.hidden_size_per_layer_input, b.hidden_size_per_layer_input);
  if (b.has_ple()) {
    EXPECT_EQ(a.vocab_size_per_layer_input, b.vocab_size_per_layer_input);
  }
  EXPECT_EQ(a.attention_k_eq_v, b.attention_k_eq_v);
  EXPECT_EQ(a.num_kv_shared_layers, b.num_kv_shared_layers);
  EXPECT_EQ(a.enable_moe_block, b.enable_moe_block);
  EXPECT_EQ(a.use_double_wide_mlp, b.use_double_wide_mlp);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.top_k_experts, b.top_k_experts);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.final_logit_softcapping, b.final_logit_softcapping);
  EXPECT_NEAR(a.rms_norm_eps, b.rms_norm_eps, 1e-12);
  EXPECT_EQ(a.rope_full.theta, b.rope_full.theta);
  EXPECT_EQ(a.rope_sliding.theta, b.rope_sliding.theta);
  EXPECT_EQ(int(a.rope_full.partial_rotary_factor * a.global_head_dim) / 2,
            int(b.rope_full.partial_rotary_factor * b.global_head_dim) / 2);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].head_dim, b.layers[i].head_dim) << i;
    EXPECT_EQ(a.layers[i].kv_heads, b.layers[i].kv_heads) << i;
    EXPECT_EQ(a.layers[i].kv_source_layer, b.layers[i].kv_source_layer) << i;
    EXPECT_EQ(a.layers[i].mlp_width, b.layers[i].mlp_width) << i;
    EXPECT_EQ(a.layers[i].k_eq_v, b.layers[i].k_eq_v) << i;
  }
  // Same tensors, same bytes.
  EXPECT_EQ(g->weights.bound_tensors, h->weights.bound_tensors);
  EXPECT_EQ(g->weights.bound_bytes, h->weights.bound_bytes);
  EXPECT_EQ(g->weights.parameter_count, h->weights.parameter_count);
  const TensorView &ge = *g->weights.embed_tokens, &he = *h->weights.embed_tokens;
  ASSERT_EQ(ge.shape, he.shape);
  EXPECT_EQ(0, std::memcmp(ge.data, he.data, ge.nbytes));
  EXPECT_EQ(0, std::memcmp(g->weights.layers[0].q_proj->data, h->weights.layers[0].q_proj->data,
                           h->weights.layers[0].q_proj->nbytes));
}

TEST_P(GgufFixture, LogitsMatchExpected) {
  auto model = load_model(dir() / "model.gguf");
  auto j = nlohmann::json::parse(test::read_file(dir() / "expected.json"));
  const int64_t V = j["vocab_size"].get<int64_t>();
  ASSERT_EQ(V, model->config.vocab_size);
  const auto expected = test::read_f32(dir() / "expected_logits.f32");
  float worst = 0;
  for (const auto& s : j["sequences"]) {
    const auto tokens = s["tokens"].get<std::vector<int>>();
    const int64_t off = s["row_offset"].get<int64_t>();
    const auto logits = forward_reference(*model, tokens);
    ASSERT_EQ(logits.size(), tokens.size() * size_t(V));
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* got = &logits[t * size_t(V)];
      const float* want = &expected[(size_t(off) + t) * size_t(V)];
      for (int64_t i = 0; i < V; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_EQ(std::max_element(got, got + V) - got, std::max_element(want, want + V) - want) << t;
    }
  }
  EXPECT_LE(worst, 1e-3f);
  std::printf("[ gguf fixture ] %s max |delta| = %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GgufFixture, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

}  // namespace
}  // namespace g4
