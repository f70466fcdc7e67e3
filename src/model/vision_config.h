// VisionConfig: the Gemma 4 vision tower's hyper-parameters (`vision_config`, model_type
// gemma4_vision, inside a multimodal config.json of model_type gemma4), parsed and validated
// once. Spec: ../shared/docs/gemma4-vision.md §1.1. A config without vision_config (or with it
// null) is a text-only checkpoint: the parsers return nullopt.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace g4 {

struct VisionConfig {
  int hidden_size = 0;               // Hv
  int intermediate_size = 0;         // Iv
  int num_hidden_layers = 0;         // Lv
  int num_attention_heads = 0;       // nh
  int num_key_value_heads = 0;       // nkv (== nh in every released tower)
  int head_dim = 0;                  // d, a multiple of 4 (2-D RoPE: two halves of rotate-half pairs)
  int patch_size = 0;                // p: a patch row holds p·p·3 values
  int pooling_kernel_size = 0;       // k: k x k patches become one soft token
  int position_embedding_size = 0;   // P: rows per axis of the position table (bounds the grid side)
  double rms_norm_eps = 1e-6;
  double rope_theta = 100.0;
  bool use_clipped_linears = false;  // every encoder linear clamps its input and output
  bool standardize = false;          // (y - std_bias) · std_scale after pooling
  std::string hidden_activation = "gelu_pytorch_tanh";
  int default_output_length = 0;     // the processor's default budget (released files: 280); 0 when absent

  // Soft tokens per image when a request names no budget: default_output_length, else 280 (the
  // released processors' max_soft_tokens).
  int default_image_budget() const { return default_output_length > 0 ? default_output_length : 280; }
  int64_t patch_width() const { return int64_t(patch_size) * patch_size * 3; }  // 3p²
  int64_t q_width() const { return int64_t(num_attention_heads) * head_dim; }   // nh·d
  int64_t kv_width() const { return int64_t(num_key_value_heads) * head_dim; }  // nkv·d
  // The widest input of any tower or projector product (a matmul context must be planned for it).
  int64_t widest_matmul_input() const;

  bool operator==(const VisionConfig&) const = default;
};

// `root` is the whole config.json. nullopt when it has no vision tower (no vision_config, or
// null). Throws g4::Error naming `source`, the field and its value for a missing required field,
// a wrong type or range, an unsupported value, or a field the tower does not know.
std::optional<VisionConfig> parse_vision_config(const nlohmann::json& root, const std::string& source);
std::optional<VisionConfig> load_vision_config(const std::filesystem::path& config_json);

// The config as a released file's vision_config object (what parse_vision_config reads back).
nlohmann::json vision_config_to_json(const VisionConfig& c);

}  // namespace g4
