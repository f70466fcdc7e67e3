// ModelConfig: the Gemma 4 text decoder's hyper-parameters, parsed once from a Hugging Face
// config.json (or, later, GGUF metadata), validated, with every derived quantity (layer plan,
// KV-sharing sources, per-layer head dims / KV heads / MLP widths) computed here and nowhere else.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace g4 {

enum class LayerType { Sliding, Full };
enum class RopeType { Default, Proportional };

struct RopeParams {
  RopeType type = RopeType::Default;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;  // proportional only: fraction of head_dim pairs that rotate
  double factor = 1.0;                 // position scaling; released models use 1
};

// One row of the layer plan (printed by `g4 info`).
struct LayerPlan {
  LayerType type = LayerType::Sliding;
  int head_dim = 0;         // d on sliding layers, global_head_dim on full layers (Q, K, V and norms)
  int kv_heads = 0;         // nKV, or num_global_key_value_heads on full layers of k_eq_v models
  bool kv_shared = false;   // reads K/V of kv_source_layer instead of computing its own
  int kv_source_layer = 0;  // == own index when not shared
  bool k_eq_v = false;      // no v_proj: V comes from the raw key projection
  int mlp_width = 0;        // I, or 2I on double-wide shared layers
  bool moe = false;
};

struct ModelConfig {
  std::string model_type;  // text model_type: gemma4_text | gemma4_unified_text
  int vocab_size = 0;
  int hidden_size = 0;                 // H
  int intermediate_size = 0;           // I
  int num_hidden_layers = 0;           // L
  int num_attention_heads = 0;         // nH
  int num_key_value_heads = 0;         // nKV (sliding layers)
  std::optional<int> num_global_key_value_heads;
  int head_dim = 256;                  // d
  int global_head_dim = 512;           // dg
  std::string hidden_activation = "gelu_pytorch_tanh";
  int max_position_embeddings = 131072;
  double rms_norm_eps = 1e-6;
  int pad_token_id = 0;
  int bos_token_id = 2;
  std::vector<int> eos_token_ids{1};
  bool tie_word_embeddings = true;
  RopeParams rope_sliding{RopeType::Default, 10000.0, 1.0, 1.0};
  RopeParams rope_full{RopeType::Proportional, 1000000.0, 0.25, 1.0};
  int sliding_window = 512;
  std::vector<LayerType> layer_types;
  std::optional<double> final_logit_softcapping;
  std::string use_bidirectional_attention;  // "" (null) or "vision"; anything else is refused
  int vocab_size_per_layer_input = 262144;
  int hidden_size_per_layer_input = 256;    // P; 0 disables per-layer embeddings
  bool attention_k_eq_v = false;
  int num_kv_shared_layers = 0;
  bool enable_moe_block = false;
  bool use_double_wide_mlp = false;
  int num_experts = 0;
  int top_k_experts = 0;
  int moe_intermediate_size = 0;
  // Multimodal token ids, from the top level of a gemma4 / gemma4_unified config.json; absent in
  // text-only configs (and GGUF). Never hard-coded: the tiny fixtures move them (500...).
  std::optional<int> image_token_id;  // <|image|>, the placeholder a soft token replaces
  std::optional<int> boi_token_id;    // <|image>
  std::optional<int> eoi_token_id;    // <image|>
  std::optional<int> video_token_id;  // <|video|>
  std::optional<int> audio_token_id;  // <|audio|>

  // Derived (filled by finalize()).
  int first_kv_shared_layer = 0;  // L - num_kv_shared_layers
  std::vector<LayerPlan> layers;
  std::vector<std::string> notes;  // non-fatal observations (ignored keys, forced values)

  bool has_ple() const { return hidden_size_per_layer_input > 0; }
  // use_bidirectional_attention == "vision": on sliding layers an image's soft tokens see every
  // token of the same image (docs/vision.md); full layers stay causal.
  bool vision_bidirectional() const { return use_bidirectional_attention == "vision"; }
  // The widest input dimension of any weight matrix (H, nH·hd for o_proj, MLP widths for
  // down_proj, the MoE expert width): what kernel tiling must plan for.
  int64_t widest_matmul_input() const;
  // Validates cross-field consistency and computes the layer plan. Throws g4::Error naming the
  // field and the value. Called by the parsers; call again after editing fields by hand.
  void finalize();
};

// `j` is the whole config.json: model_type gemma4 / gemma4_unified with a text_config, or a
// plain gemma4_text / gemma4_unified_text config. `source` names the file in error messages.
ModelConfig parse_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_config(const std::filesystem::path& config_json);

// The inverse, as a Hugging Face multimodal-style config.json (used by `g4 synth`).
nlohmann::json config_to_json(const ModelConfig& c);

const char* layer_type_name(LayerType t);  // "sliding_attention" / "full_attention"

}  // namespace g4
