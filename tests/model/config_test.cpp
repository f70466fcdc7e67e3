#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/presets.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

using json = nlohmann::json;

json tiny_text() {
  return json::parse(R"({
    "model_type": "gemma4_text", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "global_head_dim": 32, "sliding_window": 8, "hidden_size_per_layer_input": 0,
    "layer_types": ["sliding_attention","sliding_attention","full_attention",
                    "sliding_attention","sliding_attention","full_attention"],
    "final_logit_softcapping": 30.0})");
}

std::string error_of(const json& j) {
  try {
    parse_config(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesEveryFixtureVariant) {
  for (const char* v : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    ModelConfig c = load_config(test::fixtures_dir() / "gemma4-tiny" / v / "hf" / "config.json");
    EXPECT_EQ(c.hidden_size, 64) << v;
    EXPECT_EQ(c.vocab_size, 512) << v;
    EXPECT_EQ(c.sliding_window, 8) << v;
    ASSERT_TRUE(c.final_logit_softcapping.has_value());
    EXPECT_EQ(*c.final_logit_softcapping, 30.0);
    EXPECT_EQ(c.rope_full.type, RopeType::Proportional);
    EXPECT_DOUBLE_EQ(c.rope_full.partial_rotary_factor, 0.25);
    EXPECT_DOUBLE_EQ(c.rope_full.theta, 1e6);
  }
  ModelConfig e = load_config(test::fixtures_dir() / "gemma4-tiny/tiny-e/hf/config.json");
  EXPECT_EQ(e.first_kv_shared_layer, 5);
  EXPECT_EQ(e.layers[5].kv_source_layer, 3);  // sliding -> last non-shared sliding
  EXPECT_EQ(e.layers[9].kv_source_layer, 4);  // full -> last non-shared full
  EXPECT_EQ(e.layers[5].mlp_width, 256);      // double-wide on shared layers
  EXPECT_EQ(e.layers[4].mlp_width, 128);
  ModelConfig k = load_config(test::fixtures_dir() / "gemma4-tiny/tiny-31b/hf/config.json");
  EXPECT_TRUE(k.layers[3].k_eq_v);
  EXPECT_FALSE(k.layers[0].k_eq_v);
  EXPECT_EQ(k.layers[3].kv_heads, 1);  // num_global_key_value_heads on full layers
  EXPECT_EQ(k.layers[0].kv_heads, 2);
  EXPECT_EQ(k.layers[3].head_dim, 32);
}

TEST(Config, PlainAndUnifiedModelTypes) {
  json t = tiny_text();
  EXPECT_EQ(parse_config(t, "c").model_type, "gemma4_text");
  json wrapped = {{"model_type", "gemma4_unified"}, {"text_config", t}};
  wrapped["text_config"]["model_type"] = "gemma4_unified_text";
  EXPECT_EQ(parse_config(wrapped, "c").model_type, "gemma4_unified_text");
  json mm = {{"model_type", "gemma4"}, {"text_config", t}};
  EXPECT_EQ(parse_config(mm, "c").hidden_size, 64);
}

TEST(Config, ReferenceDefaults) {
  json t = tiny_text();
  t.erase("layer_types");
  t.erase("global_head_dim");
  t.erase("final_logit_softcapping");
  t["num_hidden_layers"] = 7;  // 5:1 default -> layer 5 full; the last layer forced full
  ModelConfig c = parse_config(t, "c");
  EXPECT_EQ(c.global_head_dim, 512);
  EXPECT_FALSE(c.final_logit_softcapping.has_value());
  EXPECT_EQ(c.layer_types[5], LayerType::Full);
  EXPECT_EQ(c.layer_types[6], LayerType::Full);
  EXPECT_EQ(c.layer_types[4], LayerType::Sliding);
  EXPECT_EQ(c.rope_sliding.type, RopeType::Default);
  EXPECT_DOUBLE_EQ(c.rope_sliding.theta, 10000.0);
  EXPECT_EQ(c.hidden_size_per_layer_input, 0);
  json u = tiny_text();
  u.erase("hidden_size_per_layer_input");  // the reference default is 256, not 0
  EXPECT_NE(error_of(u).find("vocab_size_per_layer_input' = 262144"), std::string::npos) << error_of(u);
  u["vocab_size_per_layer_input"] = 512;
  EXPECT_EQ(parse_config(u, "c").hidden_size_per_layer_input, 256);
}

// gemma4_unified (12B): no PLE or MoE (missing means off, not the gemma4 default of 256), a
// 1024 window and a 262144 context by default; nonzero PLE/MoE fields are refused.
TEST(Config, UnifiedDefaults) {
  json t = tiny_text();
  t["model_type"] = "gemma4_unified_text";
  t.erase("hidden_size_per_layer_input");
  t.erase("sliding_window");
  ModelConfig c = parse_config(t, "c");
  EXPECT_EQ(c.hidden_size_per_layer_input, 0);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.use_bidirectional_attention, "vision");
  t["hidden_size_per_layer_input"] = 0;  // the converter's "BC: not used" zeros are fine
  t["vocab_size_per_layer_input"] = 0;
  t["enable_moe_block"] = false;
  EXPECT_EQ(parse_config(t, "c").hidden_size_per_layer_input, 0);
  t["hidden_size_per_layer_input"] = 256;
  EXPECT_NE(error_of(t).find("gemma4_unified has no per-layer embeddings"), std::string::npos) << error_of(t);
  t["hidden_size_per_layer_input"] = 0;
  t["enable_moe_block"] = true;
  EXPECT_NE(error_of(t).find("no MoE"), std::string::npos) << error_of(t);
}

TEST(Config, GlobalKvHeadsOnlyWithKEqV) {
  json t = tiny_text();
  t["num_global_key_value_heads"] = 1;
  EXPECT_EQ(parse_config(t, "c").layers[2].kv_heads, 2);  // attention_k_eq_v false: ignored
  t["attention_k_eq_v"] = true;
  EXPECT_EQ(parse_config(t, "c").layers[2].kv_heads, 1);
  EXPECT_EQ(parse_config(t, "c").layers[0].kv_heads, 2);
}

TEST(Config, ErrorsNameFieldAndValue) {
  json t = tiny_text();
  t.erase("hidden_size");
  EXPECT_NE(error_of(t).find("'hidden_size'"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["hidden_activation"] = "silu";
  EXPECT_NE(error_of(t).find("\"silu\""), std::string::npos) << error_of(t);
  t = tiny_text();
  t["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(t).find("num_key_value_heads' = 3"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["layer_types"].push_back("full_attention");
  EXPECT_NE(error_of(t).find("7 entries"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["layer_types"][1] = "local";
  EXPECT_NE(error_of(t).find("'layer_types'[1] = \"local\""), std::string::npos) << error_of(t);
  t = tiny_text();
  t["rope_parameters"] = {{"full_attention", {{"rope_type", "yarn"}}}};
  EXPECT_NE(error_of(t).find("\"yarn\""), std::string::npos) << error_of(t);
  t = tiny_text();
  t["hidden_size"] = "64";
  EXPECT_NE(error_of(t).find("must be an integer"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["enable_moe_block"] = true;
  EXPECT_NE(error_of(t).find("num_experts"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["num_kv_shared_layers"] = 6;
  EXPECT_NE(error_of(t).find("num_kv_shared_layers' = 6"), std::string::npos) << error_of(t);
  t = tiny_text();
  t["use_bidirectional_attention"] = "all";
  EXPECT_NE(error_of(t).find("use_bidirectional_attention"), std::string::npos);
  EXPECT_NE(error_of(json{{"model_type", "llama"}}).find("\"llama\""), std::string::npos);
  EXPECT_NE(error_of(json{{"model_type", "gemma4"}}).find("text_config"), std::string::npos);
}

// The multimodal token ids sit at the top level of a gemma4 config.json; the image mask rule in
// its text_config. Both are read, not assumed; text-only configs carry neither.
TEST(Config, MultimodalTokenIdsAndTheImageMaskRule) {
  json mm = {{"model_type", "gemma4"}, {"text_config", tiny_text()}, {"image_token_id", 501}, {"boi_token_id", 500},
             {"eoi_token_id", 502}, {"video_token_id", 503}, {"audio_token_id", 504}};
  mm["text_config"].erase("model_type");
  ModelConfig c = parse_config(mm, "config.json");
  EXPECT_EQ(c.image_token_id, 501);
  EXPECT_EQ(c.boi_token_id, 500);
  EXPECT_EQ(c.eoi_token_id, 502);
  EXPECT_EQ(c.video_token_id, 503);
  EXPECT_EQ(c.audio_token_id, 504);
  EXPECT_FALSE(c.vision_bidirectional());  // absent: null, causal
  const ModelConfig back = parse_config(config_to_json(c), "round trip");
  EXPECT_EQ(back.image_token_id, 501);
  EXPECT_EQ(back.audio_token_id, 504);
  mm["text_config"]["use_bidirectional_attention"] = "vision";
  EXPECT_TRUE(parse_config(mm, "config.json").vision_bidirectional());
  mm["text_config"]["use_bidirectional_attention"] = nullptr;
  EXPECT_FALSE(parse_config(mm, "config.json").vision_bidirectional());
  for (const json& bad : {json("text"), json(5), json(true)}) {
    mm["text_config"]["use_bidirectional_attention"] = bad;
    EXPECT_NE(error_of(mm).find("text_config: field 'use_bidirectional_attention' = " + bad.dump()), std::string::npos)
        << error_of(mm);
  }
  mm["text_config"]["use_bidirectional_attention"] = nullptr;
  mm["image_token_id"] = 512;  // vocab_size is 512
  EXPECT_NE(error_of(mm).find("config.json: field 'image_token_id' = 512: outside the vocabulary"), std::string::npos)
      << error_of(mm);
  mm["image_token_id"] = -1;
  EXPECT_NE(error_of(mm).find("field 'image_token_id' = -1"), std::string::npos) << error_of(mm);
  mm["image_token_id"] = 501;
  mm["eoi_token_id"] = "502";
  EXPECT_NE(error_of(mm).find("field 'eoi_token_id' = \"502\": must be an integer"), std::string::npos) << error_of(mm);
  const ModelConfig text = parse_config(tiny_text(), "config.json");
  EXPECT_FALSE(text.image_token_id || text.boi_token_id || text.eoi_token_id || text.video_token_id ||
               text.audio_token_id);
  const ModelConfig fixture = load_config(test::fixtures_dir() / "gemma4-tiny/tiny-e/hf/config.json");
  EXPECT_FALSE(fixture.image_token_id);
  EXPECT_FALSE(fixture.vision_bidirectional());
}

// The reference rule is "last non-shared layer of the same type". Here the two layers just before
// the shared block are both sliding, so llama.cpp's (first_shared-2, first_shared-1) shortcut would
// send shared full layers to a sliding layer.
TEST(Config, KvShareSourceIsLastNonSharedLayerOfSameType) {
  json t = tiny_text();
  t["num_hidden_layers"] = 8;
  t["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  t["num_kv_shared_layers"] = 3;  // first shared = 5
  ModelConfig c = parse_config(t, "c");
  EXPECT_EQ(c.first_kv_shared_layer, 5);
  EXPECT_EQ(c.layers[5].kv_source_layer, 1);  // full -> layer 1, not 4
  EXPECT_EQ(c.layers[6].kv_source_layer, 4);  // sliding -> layer 4
  EXPECT_EQ(c.layers[7].kv_source_layer, 1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(c.layers[i].kv_shared);
  // A shared type with no earlier non-shared layer of that type is refused.
  t["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_NE(error_of(t).find("no non-shared layer of that type"), std::string::npos) << error_of(t);
}

TEST(Config, PresetsMatchTheSpecTable) {
  ModelConfig e2b = preset_config("e2b");
  EXPECT_EQ(e2b.first_kv_shared_layer, 15);
  EXPECT_EQ(e2b.layers[15].kv_source_layer, 13);
  EXPECT_EQ(e2b.layers[19].kv_source_layer, 14);
  EXPECT_EQ(e2b.layers[15].mlp_width, 12288);
  EXPECT_EQ(e2b.layers[4].type, LayerType::Full);
  ModelConfig e4b = preset_config("e4b");
  EXPECT_EQ(e4b.first_kv_shared_layer, 24);
  EXPECT_EQ(e4b.layers[24].kv_source_layer, 22);
  EXPECT_EQ(e4b.layers[29].kv_source_layer, 23);
  ModelConfig m31 = preset_config("31b");
  EXPECT_EQ(m31.layers[5].kv_heads, 4);
  EXPECT_EQ(m31.layers[5].head_dim, 512);
  EXPECT_TRUE(m31.layers[5].k_eq_v);
  EXPECT_EQ(preset_config("26b-a4b").layers[0].moe, true);
  EXPECT_EQ(preset_config("12b").model_type, "gemma4_unified_text");
  EXPECT_THROW(preset_config("7b"), Error);
  // Round trip through config.json.
  for (const auto& n : preset_names()) {
    ModelConfig c = preset_config(n);
    ModelConfig r = parse_config(config_to_json(c), n);
    EXPECT_EQ(r.layers.size(), c.layers.size()) << n;
    for (size_t i = 0; i < c.layers.size(); ++i) {
      EXPECT_EQ(r.layers[i].kv_source_layer, c.layers[i].kv_source_layer) << n << " " << i;
      EXPECT_EQ(r.layers[i].mlp_width, c.layers[i].mlp_width) << n << " " << i;
      EXPECT_EQ(r.layers[i].kv_heads, c.layers[i].kv_heads) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace g4
