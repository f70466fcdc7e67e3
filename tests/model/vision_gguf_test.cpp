// The vision tower from an mmproj GGUF. No llama.cpp-made mmproj of the tiny fixtures exists, so
// the test writes one from the fixture safetensors with the converter's tensor names and layouts
// as the spec lists them (gemma4-vision.md §6.2, spelled out here independently of the loader's
// table): the loaded tower must give the same soft tokens, bit for bit, as the safetensors one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <optional>

#include "model/gguf_writer.h"
#include "model/vision_gguf.h"
#include "model/vision_projector.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4::vision_gguf_test {

// The spec's §6.2 name for an HF vision tensor.
std::string spec_gguf_name(std::string n) {
  auto replace = [&](const std::string& from, const std::string& to) {
    if (const size_t at = n.find(from); at != std::string::npos) n.replace(at, from.size(), to);
  };
  if (n == "model.vision_tower.patch_embedder.input_proj.weight") return "v.patch_embd.weight";
  if (n == "model.vision_tower.patch_embedder.position_embedding_table") return "v.position_embd.weight";
  if (n == "model.embed_vision.embedding_projection.weight") return "mm.input_projection.weight";
  replace("model.vision_tower.encoder.layers.", "v.blk.");
  replace("model.vision_tower.", "v.");
  replace("input_layernorm.weight", "ln1.weight");
  replace("post_attention_layernorm.weight", "attn_post_norm.weight");
  replace("pre_feedforward_layernorm.weight", "ln2.weight");
  replace("post_feedforward_layernorm.weight", "ffn_post_norm.weight");
  replace("self_attn.q_norm", "attn_q_norm");
  replace("self_attn.k_norm", "attn_k_norm");
  replace("self_attn.q_proj", "attn_q");
  replace("self_attn.k_proj", "attn_k");
  replace("self_attn.v_proj", "attn_v");
  replace("self_attn.o_proj", "attn_out");
  replace("mlp.gate_proj", "ffn_gate");
  replace("mlp.up_proj", "ffn_up");
  replace("mlp.down_proj", "ffn_down");
  replace(".linear.weight", ".weight");
  return n;
}

struct Written {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// An mmproj of `m`'s vision tensors as llama.cpp's converter lays them out: the patch embedding
// as a conv weight [Hv, 3, p, p], clamp scalars as [1], everything F32. `extra` adds tensors.
void write_mmproj(const VisionModel& m, const std::filesystem::path& path, const std::vector<Written>& extra = {},
                  const std::string& projector = "gemma4v") {
  const VisionConfig& c = m.config;
  std::vector<Written> ts = extra;
  for (const auto& [name, t] : m.archive.tensors()) {
    if (name.find("vision") == std::string::npos) continue;  // vision_tower., embed_vision.
    Written w{spec_gguf_name(name), t.shape.empty() ? std::vector<int64_t>{1} : t.shape, std::vector<float>(size_t(t.numel()))};
    for (int64_t i = 0; i < t.numel(); ++i) w.data[size_t(i)] = t.at(i);
    if (w.name == "v.patch_embd.weight") {  // (Hv, p, p, 3) -> (Hv, 3, p, p)
      const int64_t p = c.patch_size, Hv = c.hidden_size;
      std::vector<float> conv(w.data.size());
      for (int64_t o = 0; o < Hv; ++o)
        for (int64_t i = 0; i < p * p * 3; ++i) conv[size_t(o * p * p * 3 + (i % 3) * p * p + i / 3)] = w.data[size_t(o * p * p * 3 + i)];
      w = {w.name, {Hv, 3, p, p}, conv};
    }
    ts.push_back(std::move(w));
  }
  GgufWriter g;
  g.set_string("general.architecture", "clip");
  g.set_string("clip.projector_type", projector);
  g.set_bool("clip.has_vision_encoder", true);
  g.set_u32("clip.vision.embedding_length", uint32_t(c.hidden_size));
  g.set_u32("clip.vision.feed_forward_length", uint32_t(c.intermediate_size));
  g.set_u32("clip.vision.block_count", uint32_t(c.num_hidden_layers));
  g.set_u32("clip.vision.attention.head_count", uint32_t(c.num_attention_heads));
  g.set_f32("clip.vision.attention.layer_norm_epsilon", float(c.rms_norm_eps));
  g.set_u32("clip.vision.patch_size", uint32_t(c.patch_size));
  g.set_u32("clip.vision.image_size", 224);  // the converter's dummy
  g.set_u32("clip.vision.projection_dim", uint32_t(m.text_hidden));
  for (const Written& w : ts) g.add_tensor(w.name, DType::F32, w.shape);
  g.write(path, [&](size_t i, std::byte* out) { std::memcpy(out, ts[i].data.data(), ts[i].data.size() * 4); });
}

class VisionMmproj : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const auto dir = test::fixtures_dir() / "gemma4-vision-tiny";
    if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no vision fixtures at " << dir;
    dir_ = dir;
    hf_ = load_vision_model(dir / GetParam() / "hf");
    ASSERT_TRUE(hf_);
  }
  std::string load_error(const std::filesystem::path& p, int64_t text_hidden = 64) const {
    try {
      load_vision_mmproj(p, text_hidden);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
  std::unique_ptr<VisionModel> hf_;
  test::TempDir tmp_;
};

TEST_P(VisionMmproj, SameConfigAndSoftTokensAsTheSafetensors) {
  const auto path = tmp_ / "mmproj.gguf";
  write_mmproj(*hf_, path);
  const auto gg = load_vision_mmproj(path, hf_->text_hidden);
  const VisionConfig &a = hf_->config, &b = gg->config;
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.intermediate_size, a.intermediate_size);
  EXPECT_EQ(b.num_hidden_layers, a.num_hidden_layers);
  EXPECT_EQ(b.num_attention_heads, a.num_attention_heads);
  EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.patch_size, a.patch_size);
  EXPECT_EQ(b.pooling_kernel_size, a.pooling_kernel_size);
  EXPECT_EQ(b.position_embedding_size, a.position_embedding_size);
  EXPECT_EQ(b.use_clipped_linears, a.use_clipped_linears);
  EXPECT_EQ(b.standardize, a.standardize);
  EXPECT_FLOAT_EQ(float(b.rms_norm_eps), float(a.rms_norm_eps));
  const auto manifest = nlohmann::json::parse(test::read_file(dir_ / GetParam() / "manifest.json"));
  for (const char* image : {"img0_exact_108x84", "img1_wide_60x150"}) {
    const auto& im = manifest["images"][image];
    const int64_t n = im["n_patches"].get<int64_t>();
    auto px = test::read_f32(dir_ / "images" / (std::string(image) + ".pixel_values.f32"));
    auto pos = test::read_i32(dir_ / "images" / (std::string(image) + ".position_ids.i32"));
    px.resize(size_t(n * a.patch_width()));
    pos.resize(size_t(2 * n));
    const VisionInput in{px, pos, im["patch_grid_hw"][0].get<int>(), im["patch_grid_hw"][1].get<int>()};
    const auto want = encode_image(a, hf_->weights, in, blocks::Exec{});
    const auto got = encode_image(b, gg->weights, in, blocks::Exec{});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(test::max_abs_diff(got.data(), want.data(), got.size()), 0.0f) << image;
  }
}

TEST_P(VisionMmproj, RefusesWhatIsNotAGemma4VisionProjector) {
  const auto path = tmp_ / "bad.gguf";
  write_mmproj(*hf_, path, {}, "gemma3");
  EXPECT_NE(load_error(path).find("clip.projector_type"), std::string::npos) << load_error(path);
  write_mmproj(*hf_, path, {{"v.blk.0.out_scale.weight", {1}, {1.0f}}});
  EXPECT_NE(load_error(path).find("unknown tensor 'v.blk.0.out_scale.weight'"), std::string::npos) << load_error(path);
  write_mmproj(*hf_, path);
  const std::string err = load_error(path, 32);  // a text decoder of another width
  EXPECT_NE(err.find("'mm.input_projection.weight' (HF model.embed_vision.embedding_projection.weight)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("expected [32, 48]"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(BothTowers, VisionMmproj, ::testing::Values("tiny-e-vision", "tiny-31b-vision"));

// The image mask rule a GGUF lacks: "vision" exactly where the fixtures' configs (from the released
// ones) set it, the model without per-layer embeddings; E-models stay causal.
TEST(VisionMmprojRule, InferredFromTheFixtureConfigsOwnShapes) {
  for (const char* v : {"tiny-e-vision", "tiny-31b-vision"}) {
    const auto path = test::fixtures_dir() / "gemma4-vision-tiny" / v / "hf" / "config.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no fixtures";
    const ModelConfig truth = load_config(path);
    ModelConfig from_gguf = truth;
    from_gguf.use_bidirectional_attention.clear();  // what a GGUF's metadata gives
    infer_image_mask_rule_for_gguf(from_gguf);
    EXPECT_EQ(from_gguf.use_bidirectional_attention, truth.use_bidirectional_attention) << v;
  }
}

}  // namespace g4::vision_gguf_test
