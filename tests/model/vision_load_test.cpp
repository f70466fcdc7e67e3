// Refusals of the vision tower's loader and forward: a bad vision_config field, a missing or
// misshapen tensor, a bad image input, each named in the error. And a text-only checkpoint is
// recognised as having no vision tower.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/vision_model.h"
#include "model/vision_tower.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4::vision_load_test {

using json = nlohmann::json;

// A valid multimodal config (the tiny fixtures' vision_config) to break one field at a time.
json base_config() {
  return json::parse(R"({
    "model_type": "gemma4",
    "text_config": {"model_type": "gemma4_text"},
    "vision_config": {
      "model_type": "gemma4_vision", "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": 16, "global_head_dim": 16,
      "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-06, "max_position_embeddings": 131072,
      "attention_bias": false, "attention_dropout": 0.0,
      "rope_parameters": {"rope_type": "default", "rope_theta": 100.0},
      "pooling_kernel_size": 3, "patch_size": 4, "position_embedding_size": 64, "default_output_length": 70,
      "use_clipped_linears": true, "standardize": false, "initializer_range": 0.02
    }
  })");
}

// The error parse_vision_config throws for `j` ("" when it accepts it).
std::string config_error(const json& j) {
  try {
    parse_vision_config(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VisionConfigParse, ReadsEveryField) {
  const auto c = parse_vision_config(base_config(), "config.json");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->hidden_size, 48);
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->num_hidden_layers, 2);
  EXPECT_EQ(c->num_attention_heads, 3);
  EXPECT_EQ(c->num_key_value_heads, 3);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->patch_size, 4);
  EXPECT_EQ(c->pooling_kernel_size, 3);
  EXPECT_EQ(c->position_embedding_size, 64);
  EXPECT_DOUBLE_EQ(c->rope_theta, 100.0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->use_clipped_linears);
  EXPECT_FALSE(c->standardize);
  EXPECT_EQ(c->patch_width(), 48);
  EXPECT_EQ(c->widest_matmul_input(), 96);
}

TEST(VisionConfigParse, NoVisionConfigMeansNoVisionTower) {
  json j = base_config();
  j["vision_config"] = nullptr;
  EXPECT_FALSE(parse_vision_config(j, "config.json"));
  j.erase("vision_config");
  EXPECT_FALSE(parse_vision_config(j, "config.json"));
}

TEST(VisionConfigParse, RefusesBadFieldsNamingThem) {
  struct Case {
    std::string field;
    json value;  // null: the field is removed
    std::string says;
  };
  const std::vector<Case> cases = {
      {"hidden_size", nullptr, "required field is missing"},
      {"patch_size", nullptr, "required field is missing"},
      {"head_dim", 18, "multiple of 4"},
      {"num_key_value_heads", 2, "must divide num_attention_heads"},
      {"num_hidden_layers", "2", "must be an integer"},
      {"pooling_kernel_size", 0, "out of range"},
      {"use_clipped_linears", "yes", "must be true or false"},
      {"hidden_activation", "gelu", "unsupported activation"},
      {"model_type", "siglip_vision_model", "expected gemma4_vision"},
      {"attention_bias", true, "no biases"},
      {"rms_norm_eps", 0, "must be in (0, 1)"},
      {"vision_use_head", true, "unknown vision_config field"},
  };
  for (const Case& k : cases) {
    json j = base_config();
    if (k.value.is_null()) j["vision_config"].erase(k.field);
    else j["vision_config"][k.field] = k.value;
    const std::string err = config_error(j);
    EXPECT_NE(err.find("field '" + k.field + "'"), std::string::npos) << k.field << ": " << err;
    EXPECT_NE(err.find(k.says), std::string::npos) << k.field << ": " << err;
    EXPECT_NE(err.find("config.json: vision_config"), std::string::npos) << err;
  }
  json j = base_config();
  j["vision_config"]["rope_parameters"]["rope_type"] = "linear";
  EXPECT_NE(config_error(j).find("rope_parameters.rope_type"), std::string::npos) << config_error(j);
  j = base_config();
  j["vision_config"]["rope_parameters"]["factor"] = 2.0;
  EXPECT_NE(config_error(j).find("rope_parameters.factor"), std::string::npos) << config_error(j);
}

TEST(VisionLoad, TextOnlyCheckpointHasNoVisionTower) {
  const auto dir = test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no text fixture at " << dir;
  EXPECT_EQ(load_vision_model(dir), nullptr);
  try {
    require_vision_model(dir);
    ADD_FAILURE() << "a text-only checkpoint gave a vision tower";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no vision tower (config.json has no vision_config"), std::string::npos)
        << e.what();
  }
  // A model file (a GGUF, say) is no directory with a config.json: its tower, if any, is an mmproj.
  const auto file = dir / "model.safetensors";
  EXPECT_EQ(load_vision_model(file), nullptr);
}

class VisionTensorRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = test::fixtures_dir() / "gemma4-vision-tiny";
    if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no vision fixtures at " << dir;
    e_ = load_vision_model(dir / "tiny-e-vision" / "hf");
    b31_ = load_vision_model(dir / "tiny-31b-vision" / "hf");
    ASSERT_TRUE(e_ && b31_);
  }
  // The error binding `tensors` against m's config throws ("" when it binds).
  static std::string bind_error(const VisionModel& m, const std::map<std::string, TensorView>& tensors,
                                int64_t text_hidden = 64) {
    try {
      bind_vision_weights(m.config, text_hidden, tensors, "ckpt");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  static void expect_says(const std::string& err, const std::vector<std::string>& parts) {
    EXPECT_FALSE(err.empty());
    for (const std::string& p : parts) EXPECT_NE(err.find(p), std::string::npos) << "'" << p << "' not in: " << err;
  }
  std::unique_ptr<VisionModel> e_, b31_;
};

TEST_F(VisionTensorRefusals, BindsTheFixturesAsTheyAre) {
  EXPECT_EQ(bind_error(*e_, e_->archive.tensors()), "");
  EXPECT_EQ(bind_error(*b31_, b31_->archive.tensors()), "");
  EXPECT_TRUE(e_->weights.layers[1].down_proj.clipped);
  EXPECT_LT(e_->weights.layers[1].down_proj.output_max, 1e30f);
  EXPECT_FALSE(b31_->weights.layers[0].q_proj.clipped);
  EXPECT_NE(b31_->weights.std_scale, nullptr);
  EXPECT_EQ(e_->weights.std_scale, nullptr);
}

TEST_F(VisionTensorRefusals, MissingTensorIsNamed) {
  auto t = e_->archive.tensors();
  const std::string name = "model.vision_tower.encoder.layers.1.mlp.up_proj.linear.weight";
  t.erase(name);
  expect_says(bind_error(*e_, t), {"missing tensor '" + name + "'", "[96, 48]"});
  t = e_->archive.tensors();
  t.erase("model.vision_tower.encoder.layers.0.self_attn.o_proj.output_max");
  expect_says(bind_error(*e_, t), {"model.vision_tower.encoder.layers.0.self_attn.o_proj.output_max", "missing"});
  t = b31_->archive.tensors();
  t.erase("model.vision_tower.std_scale");
  expect_says(bind_error(*b31_, t), {"model.vision_tower.std_scale", "missing"});
}

TEST_F(VisionTensorRefusals, WrongShapeIsNamedWithBothShapes) {
  auto t = e_->archive.tensors();
  t.at("model.vision_tower.encoder.layers.0.self_attn.q_norm.weight").shape = {8};
  expect_says(bind_error(*e_, t), {"model.vision_tower.encoder.layers.0.self_attn.q_norm.weight", "has shape [8]",
                                   "expected [16]"});
  t = e_->archive.tensors();
  t.at("model.vision_tower.patch_embedder.position_embedding_table").shape = {2, 32, 96};
  expect_says(bind_error(*e_, t), {"position_embedding_table", "[2, 32, 96]", "expected [2, 64, 48]"});
  // The projector's output width is the text decoder's hidden size.
  expect_says(bind_error(*e_, e_->archive.tensors(), 32),
              {"model.embed_vision.embedding_projection.weight", "has shape [64, 48]", "expected [32, 48]"});
}

TEST_F(VisionTensorRefusals, TensorTheConfigDoesNotExplainIsRefused) {
  auto t = b31_->archive.tensors();
  TensorView extra = t.at("model.vision_tower.encoder.layers.1.input_layernorm.weight");
  extra.name = "model.vision_tower.encoder.layers.2.input_layernorm.weight";
  t.emplace(extra.name, extra);
  expect_says(bind_error(*b31_, t), {"unexpected tensor '" + extra.name + "'"});
}

TEST(VisionInputCheck, RefusesInputsThatDoNotDescribeTheGrid) {
  const auto c = *parse_vision_config(base_config(), "config.json");
  std::vector<float> px(size_t(9 * c.patch_width()), 0.5f);
  std::vector<int32_t> pos;
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 3; ++x) pos.insert(pos.end(), {x, y});
  EXPECT_NO_THROW(check_vision_input(c, {px, pos, 3, 3}));
  EXPECT_EQ(vision_soft_tokens(c, {px, pos, 3, 3}), 1);
  auto says = [&](const VisionInput& in, const std::string& part) {
    try {
      check_vision_input(c, in);
      ADD_FAILURE() << "accepted; expected: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  says({px, pos, 1, 9}, "not a multiple of the pooling kernel");
  says({std::span<const float>(px).first(px.size() - 1), pos, 3, 3}, "pixel values");
  says({px, std::span<const int32_t>(pos).first(16), 3, 3}, "positions, expected 9");
  auto bad = pos;
  bad[16] = 3;  // x of the last patch outside the 3-wide grid
  says({px, bad, 3, 3}, "outside the 3x3 grid");
  bad = pos;
  bad[16] = 0;
  bad[17] = 0;  // (0, 0) twice
  says({px, bad, 3, 3}, "repeats position (0, 0)");
  std::vector<float> big(size_t(66 * 3 * c.patch_width()));
  std::vector<int32_t> big_pos(size_t(2 * 66 * 3));
  says({big, big_pos, 3, 66}, "exceeds the position table");
}

}  // namespace g4::vision_load_test
