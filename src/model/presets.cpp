#include "model/presets.h"

#include "platform/error.h"

namespace g4 {

namespace {

std::vector<LayerType> pattern(int layers, int period) {  // full where i % period == period - 1
  std::vector<LayerType> t;
  for (int i = 0; i < layers; ++i) t.push_back(i % period == period - 1 ? LayerType::Full : LayerType::Sliding);
  return t;
}

ModelConfig base(int vocab, int H, int I, int L, int nH, int nKV, int d, int dg, int window, int period) {
  ModelConfig c;
  c.model_type = "gemma4_text";
  c.vocab_size = vocab;
  c.hidden_size = H;
  c.intermediate_size = I;
  c.num_hidden_layers = L;
  c.num_attention_heads = nH;
  c.num_key_value_heads = nKV;
  c.head_dim = d;
  c.global_head_dim = dg;
  c.sliding_window = window;
  c.layer_types = pattern(L, period);
  c.final_logit_softcapping = 30.0;
  c.eos_token_ids = {1, 106};
  c.hidden_size_per_layer_input = 0;
  c.vocab_size_per_layer_input = vocab;
  return c;
}

// A drafter's text stack: 4 layers S,S,S,F, no softcap, no per-layer inputs; its layers own no
// K/V (they read the target's).
ModelConfig drafter_stack(int vocab, int H, int I, int nH, int nKV, int d, int dg, int window) {
  ModelConfig c = base(vocab, H, I, 4, nH, nKV, d, dg, window, 4);
  c.final_logit_softcapping.reset();
  c.vocab_size_per_layer_input = 0;
  return c;
}

}  // namespace

std::vector<std::string> preset_assistant_names() { return {"tiny-assistant", "e2b-assistant", "e4b-assistant"}; }

AssistantConfig preset_assistant_config(const std::string& name) {
  AssistantConfig d;
  if (name == "tiny-assistant") {  // for tiny-e: 1 KV head, head dims 16 / 32, window 8
    d.text = drafter_stack(512, 32, 64, 2, 1, 16, 32, 8);
    d.text.max_position_embeddings = 4096;
    d.backbone_hidden_size = 64;
    d.num_centroids = 32;
    d.centroid_intermediate_top_k = 4;
  } else if (name == "e2b-assistant") {  // google/gemma-4-E2B-it-assistant's geometry
    d.text = drafter_stack(262144, 256, 2048, 4, 1, 256, 512, 512);
    d.backbone_hidden_size = 1536;
  } else if (name == "e4b-assistant") {  // google/gemma-4-E4B-it-assistant's, as ports' fixtures agree on it
    d.text = drafter_stack(262144, 256, 2048, 4, 2, 256, 512, 512);
    d.backbone_hidden_size = 2560;
  } else {
    std::string names;
    for (const auto& n : preset_assistant_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown drafter preset '" + name + "' (known: " + names + ")");
  }
  d.use_ordered_embeddings = true;
  d.text.finalize();
  for (LayerPlan& p : d.text.layers) p.kv_shared = true;
  return d;
}

std::vector<std::string> preset_names() {
  return {"tiny-e", "tiny-31b", "tiny-moe", "e2b", "e4b", "12b", "26b-a4b", "31b",
          "tiny-e-vision", "e2b-vision", "e4b-vision", "26b-a4b-vision", "31b-vision"};
}

namespace {

const std::string kVisionSuffix = "-vision";

bool is_vision_preset(const std::string& name) {
  return name.size() > kVisionSuffix.size() &&
         name.compare(name.size() - kVisionSuffix.size(), kVisionSuffix.size(), kVisionSuffix) == 0;
}

VisionConfig tower(int Hv, int Iv, int Lv, int nh, int d, int p, int P, int budget) {
  return VisionConfig{.hidden_size = Hv, .intermediate_size = Iv, .num_hidden_layers = Lv, .num_attention_heads = nh,
                      .num_key_value_heads = nh, .head_dim = d, .patch_size = p, .pooling_kernel_size = 3,
                      .position_embedding_size = P, .default_output_length = budget};
}

}  // namespace

std::optional<VisionConfig> preset_vision_config(const std::string& name) {
  if (!is_vision_preset(name)) {
    (void)preset_config(name);  // throws for an unknown name
    return std::nullopt;
  }
  const std::string text = name.substr(0, name.size() - kVisionSuffix.size());
  VisionConfig v;
  if (text == "tiny-e") {  // the shape of ../shared/fixtures/gemma4-vision-tiny/tiny-e-vision
    v = tower(48, 96, 2, 3, 16, 4, 64, 70);
    v.use_clipped_linears = true;
  } else if (text == "e2b" || text == "e4b") {
    // E2B: the gemma-4-E2B-it mmproj GGUF's clip.vision.* keys (block_count 16, embedding_length
    // 768, feed_forward_length 3072, head_count 12, patch_size 16; ollama.com's listing of
    // gemma-4-E2B-it-qat-q4_0-gguf); E4B: its config.json's vision_config (gemma4-vision.md §1.1).
    v = tower(768, 3072, 16, 12, 64, 16, 10240, 280);
    v.use_clipped_linears = true;
  } else if (text == "26b-a4b" || text == "31b") {
    // 26B-A4B: gemma4-vision.md §1.1; 31B: a vision_config extracted from google/gemma-4-31B-it
    // (huggingface.co/rnagabh/gemma4-vision-encoder config.json): the same 1152-wide tower.
    v = tower(1152, 4304, 27, 16, 72, 16, 10240, 280);
    v.standardize = true;
  } else {
    throw Error("unknown preset '" + name + "' (no vision tower for '" + text + "')");
  }
  return v;
}

void set_media_token_ids(ModelConfig& c) {
  const bool released = c.vocab_size > 258884;
  c.boi_token_id = released ? 255999 : 500;
  c.image_token_id = released ? 258880 : 501;
  c.eoi_token_id = released ? 258882 : 502;
  c.video_token_id = released ? 258884 : 503;
  c.audio_token_id = released ? 258881 : 504;
}

ModelConfig preset_config(const std::string& name) {
  if (is_vision_preset(name)) {
    const std::string text = name.substr(0, name.size() - kVisionSuffix.size());
    ModelConfig c = preset_config(text);
    (void)preset_vision_config(name);  // throws for a text preset without a tower
    // The larger sizes let an image's soft tokens see each other on sliding layers (§1.2).
    if (text == "26b-a4b" || text == "31b") c.use_bidirectional_attention = "vision";
    set_media_token_ids(c);
    return c;
  }
  ModelConfig c;
  if (name == "tiny-e") {  // E2B-like: PLE, KV sharing, double-wide MLP on shared layers
    c = base(512, 64, 128, 10, 4, 1, 16, 32, 8, 5);
    c.max_position_embeddings = 4096;
    c.hidden_size_per_layer_input = 16;
    c.num_kv_shared_layers = 5;
    c.use_double_wide_mlp = true;
  } else if (name == "tiny-31b") {  // 31B-like: K=V full layers, fewer global KV heads
    c = base(512, 64, 128, 8, 4, 2, 16, 32, 8, 4);
    c.max_position_embeddings = 4096;
    c.attention_k_eq_v = true;
    c.num_global_key_value_heads = 1;
  } else if (name == "tiny-moe") {  // 26B-A4B-like: dense MLP + routed experts
    c = base(512, 64, 96, 6, 4, 2, 16, 32, 8, 3);
    c.max_position_embeddings = 4096;
    c.attention_k_eq_v = true;
    c.num_global_key_value_heads = 1;
    c.enable_moe_block = true;
    c.num_experts = 8;
    c.top_k_experts = 2;
    c.moe_intermediate_size = 32;
  } else if (name == "e2b") {
    c = base(262144, 1536, 6144, 35, 8, 1, 256, 512, 512, 5);
    c.hidden_size_per_layer_input = 256;
    c.num_kv_shared_layers = 20;
    c.use_double_wide_mlp = true;
  } else if (name == "e4b") {
    c = base(262144, 2560, 10240, 42, 8, 2, 256, 512, 512, 6);
    c.hidden_size_per_layer_input = 256;
    c.num_kv_shared_layers = 18;
  } else if (name == "12b") {
    c = base(262144, 3840, 15360, 48, 16, 8, 256, 512, 1024, 6);
    c.model_type = "gemma4_unified_text";
    c.max_position_embeddings = 262144;
    c.attention_k_eq_v = true;
    c.num_global_key_value_heads = 1;
  } else if (name == "26b-a4b") {
    c = base(262144, 2816, 2112, 30, 16, 8, 256, 512, 1024, 6);
    c.max_position_embeddings = 262144;
    c.attention_k_eq_v = true;
    c.num_global_key_value_heads = 2;
    c.enable_moe_block = true;
    c.num_experts = 128;
    c.top_k_experts = 8;
    c.moe_intermediate_size = 704;
  } else if (name == "31b") {
    c = base(262144, 5376, 21504, 60, 32, 16, 256, 512, 1024, 6);
    c.max_position_embeddings = 262144;
    c.attention_k_eq_v = true;
    c.num_global_key_value_heads = 4;
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    for (const auto& n : preset_assistant_names()) names += ", " + n;
    throw Error("unknown preset '" + name + "' (known: " + names + ")");
  }
  if (c.vocab_size_per_layer_input != c.vocab_size || c.hidden_size_per_layer_input == 0)
    c.vocab_size_per_layer_input = c.vocab_size;
  c.finalize();
  return c;
}

}  // namespace g4
