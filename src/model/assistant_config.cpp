#include "model/assistant_config.h"

#include "model/config_fields.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "platform/error.h"

namespace g4 {

using json = nlohmann::json;

namespace {

// The top-level fields of an assistant config, each refused with its file, name and value.
struct TopFields {
  const json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    const std::string val = j.contains(key) ? j.at(key).dump() : "(absent)";
    throw Error(source + ": field '" + key + "' = " + val + ": " + why);
  }
  bool has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }
  int get_int(const std::string& key, std::optional<int> fallback) const {
    if (!has(key)) {
      if (!fallback) fail(key, "required field is missing");
      return *fallback;
    }
    if (!j.at(key).is_number_integer()) fail(key, "must be an integer");
    const long long v = j.at(key).get<long long>();
    if (v < 1 || v > (1ll << 31) - 1) fail(key, "out of range (min 1)");
    return int(v);
  }
  bool get_bool(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) fail(key, "must be true or false");
    return j.at(key).get<bool>();
  }
};

// The text_config as parse_config reads it: the drafter's layers own no K/V (the target's are
// read instead), which a plain text config cannot say, so the copy declares no sharing and the
// plans are marked shared afterwards. Refuses what the reference's validate_architecture does.
json text_config_for_parsing(const json& root, const std::string& where) {
  if (!root.contains("text_config") || !root.at("text_config").is_object())
    throw Error(where + ": model_type 'gemma4_assistant' needs an object field 'text_config'");
  json t = root.at("text_config");
  const TopFields f{t, where + ": text_config"};
  if (!t.contains("model_type")) t["model_type"] = "gemma4_text";
  if (!t["model_type"].is_string() || t["model_type"].get<std::string>() != "gemma4_text")
    f.fail("model_type", "a drafter's text_config must be gemma4_text");
  for (const char* key : {"hidden_size_per_layer_input", "vocab_size_per_layer_input"}) {
    if (f.has(key) && (!t[key].is_number_integer() || t[key].get<long long>() != 0))
      f.fail(key, "must be 0: a drafter has no per-layer embeddings");
    t[key] = 0;
  }
  if (f.get_bool("enable_moe_block", false)) f.fail("enable_moe_block", "a drafter has no MoE block");
  if (f.get_bool("use_double_wide_mlp", false)) f.fail("use_double_wide_mlp", "a drafter has no double-wide MLP");
  const int layers = f.get_int("num_hidden_layers", std::nullopt);
  if (f.has("num_kv_shared_layers")) {
    const json& s = t["num_kv_shared_layers"];
    if (!s.is_number_integer() || (s.get<long long>() != 0 && s.get<long long>() != layers))
      f.fail("num_kv_shared_layers", "must equal num_hidden_layers = " + std::to_string(layers) +
                                         " (every drafter layer reads the target's K/V)");
  }
  t["num_kv_shared_layers"] = 0;
  return t;
}

}  // namespace

AssistantConfig parse_assistant_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": config is not a JSON object");
  const TopFields f{j, source};
  if (!j.contains("model_type") || !j["model_type"].is_string() || j["model_type"].get<std::string>() != "gemma4_assistant")
    f.fail("model_type", "not a Gemma 4 drafter (expected gemma4_assistant)");
  AssistantConfig d;
  d.backbone_hidden_size = f.get_int("backbone_hidden_size", std::nullopt);
  d.use_ordered_embeddings = f.get_bool("use_ordered_embeddings", false);
  d.num_centroids = f.get_int("num_centroids", 2048);
  d.centroid_intermediate_top_k = f.get_int("centroid_intermediate_top_k", 32);
  d.tie_word_embeddings = f.get_bool("tie_word_embeddings", true);
  if (!d.tie_word_embeddings) f.fail("tie_word_embeddings", "g4 reads drafters whose head is their embed_tokens (tied)");
  d.text = parse_config(text_config_for_parsing(j, source), source + ": text_config");
  for (LayerPlan& p : d.text.layers) p.kv_shared = true;  // no k_proj/v_proj: the target's K/V
  if (d.use_ordered_embeddings) {
    if (d.text.vocab_size % d.num_centroids)
      f.fail("num_centroids", "must divide text_config.vocab_size = " + std::to_string(d.text.vocab_size));
    if (d.centroid_intermediate_top_k > d.num_centroids)
      f.fail("centroid_intermediate_top_k", "exceeds num_centroids = " + std::to_string(d.num_centroids));
  }
  return d;
}

AssistantConfig load_assistant_config(const std::filesystem::path& path) {
  return parse_assistant_config(read_config_json(path), path.string());
}

json assistant_config_to_json(const AssistantConfig& d) {
  json text = config_to_json(d.text)["text_config"];
  text["num_kv_shared_layers"] = d.text.num_hidden_layers;
  return {{"architectures", {"Gemma4AssistantForCausalLM"}},
          {"model_type", "gemma4_assistant"},
          {"backbone_hidden_size", d.backbone_hidden_size},
          {"use_ordered_embeddings", d.use_ordered_embeddings},
          {"num_centroids", d.num_centroids},
          {"centroid_intermediate_top_k", d.centroid_intermediate_top_k},
          {"tie_word_embeddings", true},
          {"text_config", text}};
}

AssistantPairing pair_assistant(const AssistantConfig& d, const ModelConfig& t, const std::string& drafter_source,
                            const std::string& target_source) {
  std::vector<std::string> diffs;
  auto compare = [&](const std::string& drafter_field, long long dv, const std::string& target_field, long long tv) {
    if (dv != tv)
      diffs.push_back("drafter " + drafter_field + " = " + std::to_string(dv) + " but target " + target_field + " = " +
                      std::to_string(tv));
  };
  compare("backbone_hidden_size", d.backbone_hidden_size, "hidden_size", t.hidden_size);
  compare("text_config.vocab_size", d.text.vocab_size, "vocab_size", t.vocab_size);
  compare("text_config.sliding_window", d.text.sliding_window, "sliding_window", t.sliding_window);
  AssistantPairing pairing;
  for (int i = 0; i < t.first_kv_shared_layer; ++i)
    (t.layers[size_t(i)].type == LayerType::Full ? pairing.full_layer : pairing.sliding_layer) = i;
  for (LayerType type : {LayerType::Sliding, LayerType::Full}) {
    const LayerPlan* mine = nullptr;
    for (const LayerPlan& p : d.text.layers)
      if (p.type == type) mine = &p;
    if (!mine) continue;
    const std::string name = layer_type_name(type);
    const int src = pairing.target_layer(type);
    if (src < 0) {
      diffs.push_back("the drafter has " + name + " layers but the target has no " + name + " layer that owns K/V");
      continue;
    }
    const LayerPlan& theirs = t.layers[size_t(src)];
    const bool full = type == LayerType::Full;
    compare(std::string("text_config.") + (full ? "global_head_dim" : "head_dim"), mine->head_dim,
            std::string(full ? "global_head_dim" : "head_dim") + " (layer " + std::to_string(src) + ")", theirs.head_dim);
    compare("KV heads of " + name + " layers", mine->kv_heads, "KV heads of layer " + std::to_string(src), theirs.kv_heads);
  }
  if (!diffs.empty()) {
    std::string msg = drafter_source + " is not a drafter for " + target_source + ": ";
    for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
    throw Error(msg);
  }
  return pairing;
}

}  // namespace g4
