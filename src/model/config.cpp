#include "model/config.h"

#include "model/config_fields.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "platform/error.h"

namespace g4 {

using json = nlohmann::json;

namespace {

// Keys a text config may carry that do not affect the text decoder's inference.
const std::set<std::string> kIgnoredKeys = {
    "architectures", "initializer_range", "use_cache", "attention_dropout", "torch_dtype", "dtype",
    "transformers_version", "_name_or_path", "output_hidden_states", "output_attentions", "return_dict",
    "is_encoder_decoder", "tie_encoder_decoder", "chunk_size_feed_forward", "problem_type", "id2label",
    "label2id", "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
    "finetuning_task", "add_cross_attention", "cross_attention_hidden_size", "pruned_heads", "torchscript",
    "bad_words_ids", "begin_suppress_tokens", "suppress_tokens", "quantization_config", "sliding_window_pattern"};

// The multimodal token ids a gemma4 config.json carries at its top level, and where they go.
const std::pair<const char*, std::optional<int> ModelConfig::*> kMediaTokenIds[] = {
    {"image_token_id", &ModelConfig::image_token_id}, {"boi_token_id", &ModelConfig::boi_token_id},
    {"eoi_token_id", &ModelConfig::eoi_token_id},     {"video_token_id", &ModelConfig::video_token_id},
    {"audio_token_id", &ModelConfig::audio_token_id}};

using Reader = ConfigFields;

RopeParams parse_rope(const json& r, const std::string& where, RopeParams fallback) {
  if (!r.is_object()) throw Error(where + ": must be an object, got " + r.dump());
  RopeParams p = fallback;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "rope_type") {
      if (!v.is_string()) throw Error(where + ".rope_type = " + v.dump() + ": must be a string");
      std::string t = v.get<std::string>();
      if (t == "default") p.type = RopeType::Default;
      else if (t == "proportional") p.type = RopeType::Proportional;
      else throw Error(where + ".rope_type = \"" + t + "\": unsupported (g4 knows default, proportional)");
    } else if (k == "rope_theta") {
      if (!v.is_number() || v.get<double>() <= 0) throw Error(where + ".rope_theta = " + v.dump() + ": must be > 0");
      p.theta = v.get<double>();
    } else if (k == "partial_rotary_factor") {
      if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 1)
        throw Error(where + ".partial_rotary_factor = " + v.dump() + ": must be in (0, 1]");
      p.partial_rotary_factor = v.get<double>();
    } else if (k == "factor") {
      if (!v.is_number() || v.get<double>() != 1.0)
        throw Error(where + ".factor = " + v.dump() + ": only 1.0 is supported (no released Gemma 4 scales positions)");
      p.factor = 1.0;
    } else {
      throw Error(where + "." + k + " = " + v.dump() + ": unknown RoPE parameter");
    }
  }
  if (p.type == RopeType::Default && p.partial_rotary_factor != 1.0)
    throw Error(where + ": partial_rotary_factor is only meaningful for proportional RoPE");
  return p;
}

// The steps of parse_config, in the order it checks the fields (the first problem found is the
// one reported).

// The object holding the text decoder's fields: root itself, or its text_config for the
// multimodal model types. Sets `where` to name it in errors.
const json& text_config_of(const json& root, const std::string& source, std::string& top_type, std::string& where) {
  if (!root.is_object()) throw Error(source + ": config is not a JSON object");
  // (json::value() throws a type_error when the field has another type: found by fuzz/config_fuzz.)
  if (root.contains("model_type") && !root["model_type"].is_string())
    throw Error(source + ": field 'model_type' = " + root["model_type"].dump(-1, ' ', false, json::error_handler_t::replace) +
                ": must be a string");
  top_type = root.value("model_type", std::string());
  where = source;
  if (top_type == "gemma4" || top_type == "gemma4_unified") {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      throw Error(source + ": model_type '" + top_type + "' needs an object field 'text_config'");
    where = source + ": text_config";
    return root["text_config"];
  }
  if (top_type != "gemma4_text" && top_type != "gemma4_unified_text")
    throw Error(source + ": field 'model_type' = \"" + top_type +
                "\": not a Gemma 4 model (expected gemma4, gemma4_text, gemma4_unified or gemma4_unified_text)");
  return root;
}

// Geometry has no sensible default: a config without it is broken, not "default-sized".
void parse_geometry(Reader& r, ModelConfig& c) {
  c.vocab_size = r.get_int("vocab_size", std::nullopt, 1);
  c.hidden_size = r.get_int("hidden_size", std::nullopt, 1);
  c.intermediate_size = r.get_int("intermediate_size", std::nullopt, 1);
  c.num_hidden_layers = r.get_int("num_hidden_layers", std::nullopt, 1);
  c.num_attention_heads = r.get_int("num_attention_heads", std::nullopt, 1);
  c.num_key_value_heads = r.get_int("num_key_value_heads", std::nullopt, 1);
  c.head_dim = r.get_int("head_dim", 256, 2);
  c.global_head_dim = r.get_int("global_head_dim", 512, 2);
  if (r.present("num_global_key_value_heads")) c.num_global_key_value_heads = r.get_int("num_global_key_value_heads", 0, 1);
  c.hidden_activation = r.get_string("hidden_activation", "gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh")
    r.fail("hidden_activation", "unsupported activation (Gemma 4 uses gelu_pytorch_tanh)");
  c.max_position_embeddings = r.get_int("max_position_embeddings", c.model_type == "gemma4_unified_text" ? 262144 : 131072, 1);
  c.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) r.fail("rms_norm_eps", "must be in (0, 1)");
}

// pad, bos and eos (an integer or a list of them).
void parse_special_ids(Reader& r, ModelConfig& c) {
  c.pad_token_id = r.get_int("pad_token_id", 0);
  c.bos_token_id = r.get_int("bos_token_id", 2);
  if (!r.present("eos_token_id")) return;
  const json& e = r.j.at("eos_token_id");
  c.eos_token_ids.clear();
  if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int>());
  else if (e.is_array()) {
    for (const json& x : e) {
      if (!x.is_number_integer()) r.fail("eos_token_id", "must be an integer or a list of integers");
      c.eos_token_ids.push_back(x.get<int>());
    }
  } else r.fail("eos_token_id", "must be an integer or a list of integers");
}

// tie_word_embeddings, and the attention fields of other Gemma generations g4 refuses.
void parse_embedding_tie_and_attention(Reader& r, ModelConfig& c, const json& root, const std::string& source) {
  // tie_word_embeddings may sit at the top level of a multimodal config.
  if (root.contains("tie_word_embeddings") && !root["tie_word_embeddings"].is_boolean())
    throw Error(source + ": field 'tie_word_embeddings' must be true or false");
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", root.value("tie_word_embeddings", true));
  if (r.present("attention_bias") && r.get_bool("attention_bias", false)) r.fail("attention_bias", "Gemma 4 has no attention bias");
  if (r.present("attn_logit_softcapping")) r.fail("attn_logit_softcapping", "Gemma 4 has no attention-logit softcap");
  if (r.present("query_pre_attn_scalar")) r.fail("query_pre_attn_scalar", "Gemma 4 attention scaling is 1.0; this field belongs to Gemma 2/3");
  r.used.insert("attn_logit_softcapping");
}

void parse_rope_parameters(Reader& r, ModelConfig& c) {
  if (r.present("rope_parameters")) {
    const json& rp = r.j.at("rope_parameters");
    if (!rp.is_object()) r.fail("rope_parameters", "must be an object keyed by layer type");
    for (auto it = rp.begin(); it != rp.end(); ++it) {
      if (it.key() == "sliding_attention") c.rope_sliding = parse_rope(it.value(), r.where + ": rope_parameters.sliding_attention", c.rope_sliding);
      else if (it.key() == "full_attention") c.rope_full = parse_rope(it.value(), r.where + ": rope_parameters.full_attention", c.rope_full);
      else throw Error(r.where + ": rope_parameters." + it.key() + ": unknown layer type");
    }
  }
  if (r.present("rope_scaling")) r.fail("rope_scaling", "not supported for Gemma 4 (rope_parameters holds RoPE settings)");
}

void parse_attention_window(Reader& r, ModelConfig& c, bool unified) {
  c.sliding_window = r.get_int("sliding_window", unified ? 1024 : 512, 1);
  c.use_bidirectional_attention = r.get_string("use_bidirectional_attention", unified ? "vision" : "");
  if (c.use_bidirectional_attention == "all")
    r.fail("use_bidirectional_attention", "\"all\" makes every layer bidirectional: not a causal text decoder g4 can serve");
  if (!c.use_bidirectional_attention.empty() && c.use_bidirectional_attention != "vision")
    r.fail("use_bidirectional_attention", "expected null or \"vision\"");
}

// The multimodal token ids at the top level of the config (root: the whole config.json).
void parse_media_token_ids(const json& root, const std::string& source, Reader& text_reader, ModelConfig& c) {
  Reader top{root, source, {}};
  Reader& r = &root == &text_reader.j ? text_reader : top;  // a plain text config is its own top level
  for (const auto& [key, slot] : kMediaTokenIds) {
    if (!r.present(key)) continue;
    const int id = r.get_int(key, std::nullopt);
    if (id >= c.vocab_size) r.fail(key, "outside the vocabulary (vocab_size = " + std::to_string(c.vocab_size) + ")");
    c.*slot = id;
  }
}

void parse_layer_types(Reader& r, ModelConfig& c) {
  if (r.present("layer_types")) {
    const json& lt = r.j.at("layer_types");
    if (!lt.is_array()) r.fail("layer_types", "must be a list");
    for (size_t i = 0; i < lt.size(); ++i) {
      std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t == "sliding_attention") c.layer_types.push_back(LayerType::Sliding);
      else if (t == "full_attention") c.layer_types.push_back(LayerType::Full);
      else throw Error(r.where + ": field 'layer_types'[" + std::to_string(i) + "] = " + lt[i].dump() +
                       ": expected \"sliding_attention\" or \"full_attention\"");
    }
    if (int(c.layer_types.size()) != c.num_hidden_layers)
      throw Error(r.where + ": field 'layer_types' has " + std::to_string(c.layer_types.size()) +
                  " entries but num_hidden_layers = " + std::to_string(c.num_hidden_layers));
  } else {
    // The reference's default: a 5:1 pattern, every 6th layer full.
    for (int i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % 6 ? LayerType::Sliding : LayerType::Full);
    c.notes.push_back("layer_types absent: using the reference default (every 6th layer full)");
  }
  if (c.layer_types.back() != LayerType::Full) {
    c.layer_types.back() = LayerType::Full;  // the reference forces this too
    c.notes.push_back("last layer was sliding_attention; forced to full_attention as the reference does");
  }
}

// Final softcap, per-layer embeddings, K=V and KV sharing.
void parse_variant_features(Reader& r, ModelConfig& c, bool unified) {
  if (r.present("final_logit_softcapping")) {
    c.final_logit_softcapping = r.get_double("final_logit_softcapping", 0);
    if (*c.final_logit_softcapping <= 0) r.fail("final_logit_softcapping", "must be > 0 or null");
  }
  // Unified configs may carry these as 0 / false / null ("BC: not used"); anything else is refused.
  c.hidden_size_per_layer_input = r.get_int("hidden_size_per_layer_input", unified ? 0 : 256, 0);
  c.vocab_size_per_layer_input = r.get_int("vocab_size_per_layer_input", unified ? c.vocab_size : 262144, 0);
  if (unified && c.hidden_size_per_layer_input != 0)
    r.fail("hidden_size_per_layer_input", "gemma4_unified has no per-layer embeddings");
  if (c.has_ple() && c.vocab_size_per_layer_input < 1) r.fail("vocab_size_per_layer_input", "must be >= 1 with per-layer embeddings");
  c.attention_k_eq_v = r.get_bool("attention_k_eq_v", false);
  c.num_kv_shared_layers = r.get_int("num_kv_shared_layers", 0, 0);
}

void parse_moe(Reader& r, ModelConfig& c, bool unified) {
  c.enable_moe_block = r.get_bool("enable_moe_block", false);
  if (unified && c.enable_moe_block) r.fail("enable_moe_block", "gemma4_unified has no MoE block");
  c.use_double_wide_mlp = r.get_bool("use_double_wide_mlp", false);
  c.num_experts = r.present("num_experts") ? r.get_int("num_experts", 0, 1) : 0;
  c.top_k_experts = r.present("top_k_experts") ? r.get_int("top_k_experts", 0, 1) : 0;
  c.moe_intermediate_size = r.present("moe_intermediate_size") ? r.get_int("moe_intermediate_size", 0, 1) : 0;
  if (!c.enable_moe_block) return;
  if (!c.num_experts) r.fail("num_experts", "enable_moe_block is true but num_experts is missing");
  if (!c.top_k_experts) r.fail("top_k_experts", "enable_moe_block is true but top_k_experts is missing");
  if (!c.moe_intermediate_size) r.fail("moe_intermediate_size", "enable_moe_block is true but moe_intermediate_size is missing");
  if (c.top_k_experts > c.num_experts)
    r.fail("top_k_experts", "exceeds num_experts = " + std::to_string(c.num_experts));
}

}  // namespace

const char* layer_type_name(LayerType t) { return t == LayerType::Full ? "full_attention" : "sliding_attention"; }

ModelConfig parse_config(const json& root, const std::string& source) {
  std::string top_type, where;
  const json& text = text_config_of(root, source, top_type, where);
  Reader r{text, where, {}};
  ModelConfig c;
  c.model_type = r.get_string("model_type", top_type == "gemma4_unified" ? "gemma4_unified_text" : "gemma4_text");
  if (c.model_type != "gemma4_text" && c.model_type != "gemma4_unified_text")
    r.fail("model_type", "expected gemma4_text or gemma4_unified_text");
  parse_geometry(r, c);
  parse_special_ids(r, c);
  parse_embedding_tie_and_attention(r, c, root, source);
  parse_rope_parameters(r, c);
  // gemma4_unified (12B) drops per-layer inputs and MoE and changes three defaults.
  const bool unified = c.model_type == "gemma4_unified_text";
  parse_attention_window(r, c, unified);
  parse_layer_types(r, c);
  parse_variant_features(r, c, unified);
  parse_moe(r, c, unified);
  parse_media_token_ids(root, source, r, c);
  for (auto it = text.begin(); it != text.end(); ++it)
    if (!r.used.count(it.key()) && !kIgnoredKeys.count(it.key()) && it.key() != "model_type")
      c.notes.push_back("ignored unknown field '" + it.key() + "'");
  c.finalize();
  return c;
}

void ModelConfig::finalize() {
  auto bad = [&](const std::string& field, long long value, const std::string& why) {
    throw Error("config: field '" + field + "' = " + std::to_string(value) + ": " + why);
  };
  const int L = num_hidden_layers;
  if (int(layer_types.size()) != L) bad("layer_types", (long long)layer_types.size(), "length must equal num_hidden_layers");
  if (num_kv_shared_layers >= L) bad("num_kv_shared_layers", num_kv_shared_layers, "must be below num_hidden_layers = " + std::to_string(L));
  if (head_dim % 2) bad("head_dim", head_dim, "must be even (RoPE pairs channels)");
  if (global_head_dim % 2) bad("global_head_dim", global_head_dim, "must be even (RoPE pairs channels)");
  if (num_attention_heads % num_key_value_heads)
    bad("num_key_value_heads", num_key_value_heads, "must divide num_attention_heads = " + std::to_string(num_attention_heads));
  if (num_global_key_value_heads && num_attention_heads % *num_global_key_value_heads)
    bad("num_global_key_value_heads", *num_global_key_value_heads, "must divide num_attention_heads = " + std::to_string(num_attention_heads));
  if (has_ple() && vocab_size_per_layer_input > vocab_size)
    bad("vocab_size_per_layer_input", vocab_size_per_layer_input, "exceeds vocab_size = " + std::to_string(vocab_size));
  if (bos_token_id >= vocab_size) bad("bos_token_id", bos_token_id, "outside the vocabulary");
  for (int e : eos_token_ids)
    if (e < 0 || e >= vocab_size) bad("eos_token_id", e, "outside the vocabulary");
  if (rope_full.type == RopeType::Proportional && int(rope_full.partial_rotary_factor * global_head_dim) / 2 < 1)
    throw Error("config: rope_parameters.full_attention.partial_rotary_factor rotates no channel pair");

  first_kv_shared_layer = L - num_kv_shared_layers;
  // KV sharing: a shared layer reads the last non-shared layer of its own type (the reference
  // rule; "first_shared-2 / -1" only coincides with it for E2B/E4B).
  int last_of_type[2] = {-1, -1};
  for (int i = 0; i < first_kv_shared_layer; ++i) last_of_type[int(layer_types[i])] = i;
  layers.assign(L, {});
  for (int i = 0; i < L; ++i) {
    LayerPlan& p = layers[i];
    p.type = layer_types[i];
    const bool full = p.type == LayerType::Full;
    p.head_dim = full ? global_head_dim : head_dim;
    p.kv_heads = (full && attention_k_eq_v && num_global_key_value_heads) ? *num_global_key_value_heads : num_key_value_heads;
    p.k_eq_v = full && attention_k_eq_v;
    p.kv_shared = i >= first_kv_shared_layer;
    p.kv_source_layer = i;
    if (p.kv_shared) {
      int src = last_of_type[int(p.type)];
      if (src < 0)
        throw Error("config: layer " + std::to_string(i) + " (" + layer_type_name(p.type) +
                    ") is KV-shared but no non-shared layer of that type precedes layer " +
                    std::to_string(first_kv_shared_layer));
      p.kv_source_layer = src;
    }
    p.mlp_width = (use_double_wide_mlp && first_kv_shared_layer > 0 && i >= first_kv_shared_layer && num_kv_shared_layers > 0)
                      ? 2 * intermediate_size
                      : intermediate_size;
    p.moe = enable_moe_block;
  }
}

ModelConfig load_config(const std::filesystem::path& path) {
  return parse_config(read_config_json(path), path.string());
}

json config_to_json(const ModelConfig& c) {
  json lt = json::array();
  for (LayerType t : c.layer_types) lt.push_back(layer_type_name(t));
  auto rope = [](const RopeParams& p) {
    json r = {{"rope_type", p.type == RopeType::Proportional ? "proportional" : "default"}, {"rope_theta", p.theta}};
    if (p.type == RopeType::Proportional) r["partial_rotary_factor"] = p.partial_rotary_factor;
    return r;
  };
  json t = {
      {"model_type", c.model_type},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"num_global_key_value_heads", c.num_global_key_value_heads ? json(*c.num_global_key_value_heads) : json(nullptr)},
      {"head_dim", c.head_dim},
      {"global_head_dim", c.global_head_dim},
      {"hidden_activation", c.hidden_activation},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"pad_token_id", c.pad_token_id},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_ids.size() == 1 ? json(c.eos_token_ids[0]) : json(c.eos_token_ids)},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"rope_parameters", {{"sliding_attention", rope(c.rope_sliding)}, {"full_attention", rope(c.rope_full)}}},
      {"sliding_window", c.sliding_window},
      {"layer_types", lt},
      {"final_logit_softcapping", c.final_logit_softcapping ? json(*c.final_logit_softcapping) : json(nullptr)},
      {"use_bidirectional_attention", c.use_bidirectional_attention.empty() ? json(nullptr) : json(c.use_bidirectional_attention)},
      {"vocab_size_per_layer_input", c.vocab_size_per_layer_input},
      {"hidden_size_per_layer_input", c.hidden_size_per_layer_input},
      {"attention_k_eq_v", c.attention_k_eq_v},
      {"num_kv_shared_layers", c.num_kv_shared_layers},
      {"enable_moe_block", c.enable_moe_block},
      {"use_double_wide_mlp", c.use_double_wide_mlp},
      {"num_experts", c.enable_moe_block ? json(c.num_experts) : json(nullptr)},
      {"top_k_experts", c.enable_moe_block ? json(c.top_k_experts) : json(nullptr)},
      {"moe_intermediate_size", c.enable_moe_block ? json(c.moe_intermediate_size) : json(nullptr)},
  };
  json out = {{"architectures", {"Gemma4ForConditionalGeneration"}},
              {"model_type", c.model_type == "gemma4_unified_text" ? "gemma4_unified" : "gemma4"},
              {"text_config", t},
              {"vision_config", nullptr},
              {"audio_config", nullptr},
              {"tie_word_embeddings", c.tie_word_embeddings}};
  for (const auto& [key, slot] : kMediaTokenIds)
    if (c.*slot) out[key] = *(c.*slot);
  return out;
}

int64_t ModelConfig::widest_matmul_input() const {
  int64_t w = std::max<int64_t>(hidden_size, moe_intermediate_size);
  for (const LayerPlan& p : layers) w = std::max({w, int64_t(num_attention_heads) * p.head_dim, int64_t(p.mlp_width)});
  return w;
}

}  // namespace g4
