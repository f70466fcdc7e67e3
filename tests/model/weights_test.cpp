// Weight binding: every expected tensor present with the right shape, nothing unexplained under
// the text prefix, shared-layer extras tolerated, towers ignored; synth checkpoints run sanely.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "model/forward_reference.h"
#include "model/gemma4.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/synth.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

void write_checkpoint(const std::filesystem::path& dir, const ModelConfig& c, const std::vector<TensorSpec>& specs) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config_to_json(c).dump();
  write_safetensors(dir / "model.safetensors", specs, [](const TensorSpec& s, std::byte* o) { fill_synth_tensor(s, o, 7); });
}

std::string load_error(const std::filesystem::path& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kPre = "model.language_model.";

std::vector<TensorSpec> without(std::vector<TensorSpec> s, const std::string& name) {
  s.erase(std::remove_if(s.begin(), s.end(), [&](const TensorSpec& t) { return t.name == name; }), s.end());
  return s;
}

TEST(Weights, SynthPresetsLoadAndRunSanely) {
  test::TempDir dir;
  for (const char* preset : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    ModelConfig c = preset_config(preset);
    SynthOptions o;
    write_synth_checkpoint(c, o, dir / preset);
    auto m = load_model(dir / preset);
    uint64_t expected_bytes = 0;
    for (const auto& s : checkpoint_tensor_specs(c, DType::F32, kPre)) expected_bytes += s.nbytes();
    EXPECT_EQ(m->weights.bound_bytes, expected_bytes) << preset;  // an empty load cannot pass
    EXPECT_GT(m->weights.bound_bytes, 1u << 20);
    const auto logits = forward_reference(*m, {2, 100, 200, 300, 400, 17, 42, 9, 11, 12, 13, 14});
    float mx = 0, sq = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      mx = std::max(mx, std::fabs(v));
      sq += v * v;
    }
    const float rms = std::sqrt(sq / float(logits.size()));
    EXPECT_LT(mx, 25.0f) << preset << ": logits pinned near the softcap";
    EXPECT_GT(rms, 0.3f) << preset << ": logits collapsed";
  }
}

TEST(Weights, ShardedAndDtypeVariantsAgree) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-e");
  SynthOptions o;
  write_synth_checkpoint(c, o, dir / "one");
  o.shard_bytes = 512 << 10;  // several shards + index
  write_synth_checkpoint(c, o, dir / "sharded");
  EXPECT_TRUE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
  const std::vector<int> toks = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  auto a = forward_reference(*load_model(dir / "one"), toks);
  auto b = forward_reference(*load_model(dir / "sharded"), toks);
  EXPECT_EQ(a, b);
  o.dtype = DType::BF16;
  o.shard_bytes = 4ull << 30;
  write_synth_checkpoint(c, o, dir / "bf16");
  auto m = load_model(dir / "bf16");
  EXPECT_EQ(m->weights.dtype, DType::BF16);
  EXPECT_EQ(m->weights.bytes_by_dtype.count("BF16"), 1u);
  auto l = forward_reference(*m, toks);
  // Same values rounded to bf16: close to, not equal to, the f32 logits.
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - l[i]));
  EXPECT_GT(worst, 0.0f);
  EXPECT_LT(worst, 2.0f);
}

TEST(Weights, EmbeddingScaleRoundsToWeightDtype) {
  EXPECT_FLOAT_EQ(blocks::embedding_scale(1536, DType::BF16), 39.25f);
  EXPECT_FLOAT_EQ(blocks::embedding_scale(1536, DType::F32), std::sqrt(1536.0f));
  EXPECT_FLOAT_EQ(blocks::embedding_scale(256, DType::BF16), 16.0f);
}

TEST(Weights, MissingTensorNamesItAndTheExpectedShape) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-e");
  auto specs = checkpoint_tensor_specs(c, DType::F32, kPre);
  write_checkpoint(dir.path(), c, without(specs, kPre + "layers.2.mlp.up_proj.weight"));
  std::string e = load_error(dir.path());
  EXPECT_NE(e.find("missing tensor 'model.language_model.layers.2.mlp.up_proj.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("[128, 64]"), std::string::npos) << e;
}

TEST(Weights, WrongShapeNamesFileTensorExpectedAndFound) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-31b");
  auto specs = checkpoint_tensor_specs(c, DType::F32, kPre);
  for (auto& s : specs)
    if (s.name == kPre + "layers.3.self_attn.k_proj.weight") s.shape = {64, 64};
  write_checkpoint(dir.path(), c, specs);
  std::string e = load_error(dir.path());
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.3.self_attn.k_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[64, 64]"), std::string::npos) << e;
  EXPECT_NE(e.find("expected [32, 64]"), std::string::npos) << e;  // 1 global KV head x 32
}

TEST(Weights, KEqVConsistency) {
  test::TempDir dir;
  // Missing v_proj on a model whose config says K != V: refused loudly.
  ModelConfig e = preset_config("tiny-e");
  write_checkpoint(dir / "a", e, without(checkpoint_tensor_specs(e, DType::F32, kPre), kPre + "layers.4.self_attn.v_proj.weight"));
  EXPECT_NE(load_error(dir / "a").find("missing tensor 'model.language_model.layers.4.self_attn.v_proj.weight'"), std::string::npos);
  // A v_proj on a K=V full layer means config and checkpoint disagree.
  ModelConfig k = preset_config("tiny-31b");
  auto specs = checkpoint_tensor_specs(k, DType::F32, kPre);
  specs.push_back({kPre + "layers.3.self_attn.v_proj.weight", DType::F32, {32, 64}});
  write_checkpoint(dir / "b", k, specs);
  EXPECT_NE(load_error(dir / "b").find("attention_k_eq_v is true"), std::string::npos) << load_error(dir / "b");
}

TEST(Weights, SharedLayerExtrasToleratedTowersIgnoredLmHeadOptional) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-e");
  auto specs = checkpoint_tensor_specs(c, DType::F32, kPre);
  const auto base_bytes = [&] {
    uint64_t b = 0;
    for (const auto& s : specs) b += s.nbytes();
    return b;
  }();
  // The base E2B export ships k/v/k_norm on shared layers; the reference ignores them.
  specs.push_back({kPre + "layers.6.self_attn.k_proj.weight", DType::F32, {16, 64}});
  specs.push_back({kPre + "layers.6.self_attn.v_proj.weight", DType::F32, {16, 64}});
  specs.push_back({kPre + "layers.6.self_attn.k_norm.weight", DType::F32, {16}});
  specs.push_back({"model.vision_tower.encoder.layers.0.mlp.up_proj.weight", DType::F32, {8, 8}});
  specs.push_back({"model.audio_tower.layers.0.norm.weight", DType::F32, {8}});
  specs.push_back({"lm_head.weight", DType::F32, {512, 64}});
  write_checkpoint(dir / "a", c, specs);
  auto m = load_model(dir / "a");
  EXPECT_EQ(m->weights.bound_bytes, base_bytes);  // none of the extras is used
  EXPECT_EQ(m->weights.layers[6].k_proj, nullptr);
  EXPECT_EQ(m->weights.lm_head, m->weights.embed_tokens);
  // Something unexplained under the text prefix is refused.
  specs.push_back({kPre + "layers.0.self_attn.mystery.weight", DType::F32, {4}});
  write_checkpoint(dir / "b", c, specs);
  EXPECT_NE(load_error(dir / "b").find("unexpected tensor 'model.language_model.layers.0.self_attn.mystery.weight'"),
            std::string::npos);
  // Untied without lm_head is refused.
  ModelConfig u = c;
  u.tie_word_embeddings = false;
  write_checkpoint(dir / "c", u, checkpoint_tensor_specs(u, DType::F32, kPre));
  EXPECT_NE(load_error(dir / "c").find("no lm_head.weight"), std::string::npos);
}

TEST(Weights, PrefixVariantsGiveTheSameModel) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-moe");
  std::vector<std::vector<float>> results;
  for (std::string pre : {"model.language_model.", "language_model.", "model."}) {
    auto specs = checkpoint_tensor_specs(c, DType::F32, pre);
    // Same values whatever the prefix: fill by the name without its prefix.
    std::filesystem::create_directories(dir / pre);
    std::ofstream(dir / pre / "config.json") << config_to_json(c).dump();
    write_safetensors(dir / pre / "model.safetensors", specs, [&](const TensorSpec& s, std::byte* o) {
      TensorSpec bare = s;
      bare.name = s.name.substr(pre.size());
      fill_synth_tensor(bare, o, 3);
    });
    auto m = load_model(dir / pre);
    EXPECT_EQ(m->weights.prefix, pre);
    results.push_back(forward_reference(*m, {1, 2, 3, 4, 5}));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(Weights, ForwardRefusesBadTokens) {
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny/tiny-e/hf");
  EXPECT_THROW(forward_reference(*m, {}), Error);
  try {
    forward_reference(*m, {1, 512});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 512 at position 1"), std::string::npos);
  }
}

TEST(Weights, RefusesWhatIsNotAModelDirectory) {
  test::TempDir dir;
  EXPECT_NE(load_error(dir.path()).find("no config.json"), std::string::npos);
  EXPECT_NE(load_error(dir / "nope").find("expected a model directory"), std::string::npos);
  std::ofstream(dir / "config.json") << "{ not json";
  EXPECT_NE(load_error(dir.path()).find("malformed JSON"), std::string::npos);
}

}  // namespace
}  // namespace g4
