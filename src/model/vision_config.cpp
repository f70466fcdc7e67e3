#include "model/vision_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "model/config_fields.h"

#include "platform/error.h"

namespace g4 {

using json = nlohmann::json;

namespace {

// Keys every transformers config may carry that say nothing about the tower's arithmetic.
const std::set<std::string> kVisionIgnoredKeys = {
    "initializer_range", "attention_dropout", "dtype", "torch_dtype", "transformers_version", "_name_or_path",
    "architectures", "output_hidden_states", "output_attentions", "return_dict", "use_cache", "id2label",
    "label2id", "problem_type", "chunk_size_feed_forward", "is_encoder_decoder", "pruned_heads", "torchscript",
    "tie_word_embeddings", "_attn_implementation_autoset", "model_type"};

// rope_parameters: {rope_type: "default", rope_theta: θ}. The tower's 2-D RoPE has no other form.
double parse_vision_rope(ConfigFields& f) {
  if (!f.present("rope_parameters")) return 100.0;
  const json& r = f.j.at("rope_parameters");
  if (!r.is_object()) f.fail("rope_parameters", "must be an object {rope_type, rope_theta}");
  double theta = 100.0;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string field = "rope_parameters." + it.key();
    const json& v = it.value();
    if (it.key() == "rope_type") {
      if (!v.is_string() || v.get<std::string>() != "default")
        throw Error(f.where + ": field '" + field + "' = " + v.dump() + ": the vision tower's 2-D RoPE is \"default\"");
    } else if (it.key() == "rope_theta") {
      if (!v.is_number() || v.get<double>() <= 0)
        throw Error(f.where + ": field '" + field + "' = " + v.dump() + ": must be a number > 0");
      theta = v.get<double>();
    } else {
      throw Error(f.where + ": field '" + field + "' = " + v.dump() + ": unknown RoPE parameter for the vision tower");
    }
  }
  return theta;
}

void parse_vision_geometry(ConfigFields& f, VisionConfig& c) {
  c.hidden_size = f.get_int("hidden_size", std::nullopt, 1);
  c.intermediate_size = f.get_int("intermediate_size", std::nullopt, 1);
  c.num_hidden_layers = f.get_int("num_hidden_layers", std::nullopt, 1);
  c.num_attention_heads = f.get_int("num_attention_heads", std::nullopt, 1);
  c.num_key_value_heads = f.get_int("num_key_value_heads", c.num_attention_heads, 1);
  c.head_dim = f.get_int("head_dim", std::nullopt, 1);
  c.patch_size = f.get_int("patch_size", std::nullopt, 1);
  c.pooling_kernel_size = f.get_int("pooling_kernel_size", std::nullopt, 1);
  c.position_embedding_size = f.get_int("position_embedding_size", std::nullopt, 1);
  if (c.head_dim % 4) f.fail("head_dim", "must be a multiple of 4 (2-D RoPE rotates pairs within each half)");
  if (c.num_attention_heads % c.num_key_value_heads)
    f.fail("num_key_value_heads", "must divide num_attention_heads = " + std::to_string(c.num_attention_heads));
  // Present in released files and unused by the tower; still checked for type.
  f.get_int("global_head_dim", 0, 0);
  f.get_int("max_position_embeddings", 0, 0);
  c.default_output_length = f.get_int("default_output_length", 0, 0);
}

void parse_vision_numerics(ConfigFields& f, VisionConfig& c) {
  c.rms_norm_eps = f.get_double("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) f.fail("rms_norm_eps", "must be in (0, 1)");
  c.rope_theta = parse_vision_rope(f);
  c.hidden_activation = f.get_string("hidden_activation", "gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh")
    f.fail("hidden_activation", "unsupported activation (the Gemma 4 vision tower uses gelu_pytorch_tanh)");
  if (f.get_bool("attention_bias", false)) f.fail("attention_bias", "the Gemma 4 vision tower has no biases");
  c.use_clipped_linears = f.get_bool("use_clipped_linears", false);
  c.standardize = f.get_bool("standardize", false);
}

}  // namespace

int64_t VisionConfig::widest_matmul_input() const {
  return std::max({patch_width(), int64_t(hidden_size), q_width(), int64_t(intermediate_size)});
}

std::optional<VisionConfig> parse_vision_config(const json& root, const std::string& source) {
  if (!root.is_object()) throw Error(source + ": config is not a JSON object");
  if (!root.contains("vision_config") || root.at("vision_config").is_null()) return std::nullopt;
  const json& v = root.at("vision_config");
  if (!v.is_object()) throw Error(source + ": field 'vision_config' = " + v.dump().substr(0, 120) + ": must be an object");
  ConfigFields f{v, source + ": vision_config", {}};
  if (f.get_string("model_type", "gemma4_vision") != "gemma4_vision")
    f.fail("model_type", "not a Gemma 4 vision tower (expected gemma4_vision)");
  VisionConfig c;
  parse_vision_geometry(f, c);
  parse_vision_numerics(f, c);
  for (auto it = v.begin(); it != v.end(); ++it)
    if (!f.used.count(it.key()) && !kVisionIgnoredKeys.count(it.key()))
      f.fail(it.key(), "unknown vision_config field (g4 cannot tell whether it changes the tower's arithmetic)");
  return c;
}

std::optional<VisionConfig> load_vision_config(const std::filesystem::path& path) {
  return parse_vision_config(read_config_json(path), path.string());
}

json vision_config_to_json(const VisionConfig& c) {
  return {{"model_type", "gemma4_vision"},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_key_value_heads},
          {"head_dim", c.head_dim},
          {"global_head_dim", c.head_dim},  // released files repeat head_dim here
          {"hidden_activation", c.hidden_activation},
          {"rms_norm_eps", c.rms_norm_eps},
          {"max_position_embeddings", 131072},
          {"attention_bias", false},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}},
          {"pooling_kernel_size", c.pooling_kernel_size},
          {"patch_size", c.patch_size},
          {"position_embedding_size", c.position_embedding_size},
          {"default_output_length", c.default_output_length},
          {"use_clipped_linears", c.use_clipped_linears},
          {"standardize", c.standardize}};
}

}  // namespace g4
