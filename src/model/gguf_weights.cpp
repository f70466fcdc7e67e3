#include "model/gguf_weights.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "platform/error.h"

namespace g4 {

namespace {

const char* kPrefix = "model.language_model.";

// (GGUF suffix, HF suffix) for global tensors and for per-layer tensors (blk.N. / layers.N.).
const std::vector<std::pair<std::string, std::string>> kGlobal = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
    {"output_norm.weight", "norm.weight"},
};
const std::vector<std::pair<std::string, std::string>> kLayer = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
};

// "blk.12.rest" -> (12, "rest"); false when name is not of that form.
bool split_layer(const std::string& name, const std::string& head, int& layer, std::string& rest) {
  if (name.rfind(head, 0) != 0) return false;
  size_t i = head.size(), j = i;
  while (j < name.size() && j - i < 6 && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.' || (name[i] == '0' && j - i > 1)) return false;
  layer = std::stoi(name.substr(i, j - i));
  rest = name.substr(j + 1);
  return true;
}

}  // namespace

std::optional<std::string> gguf_to_hf_name(const std::string& n) {
  if (n == "output.weight") return std::string("lm_head.weight");
  for (const auto& [gg, hf] : kGlobal)
    if (n == gg) return kPrefix + hf;
  int layer;
  std::string rest;
  if (split_layer(n, "blk.", layer, rest))
    for (const auto& [gg, hf] : kLayer)
      if (rest == gg) return kPrefix + std::string("layers.") + std::to_string(layer) + "." + hf;
  return std::nullopt;
}

std::optional<std::string> hf_to_gguf_name(const std::string& n) {
  if (n == "lm_head.weight" || n == kPrefix + std::string("lm_head.weight")) return std::string("output.weight");
  if (n.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string r = n.substr(std::string(kPrefix).size());
  for (const auto& [gg, hf] : kGlobal)
    if (r == hf) return gg;
  int layer;
  std::string rest;
  if (split_layer(r, "layers.", layer, rest))
    for (const auto& [gg, hf] : kLayer)
      if (rest == hf) return "blk." + std::to_string(layer) + "." + gg;
  return std::nullopt;
}

std::map<std::string, TensorView> gguf_tensors_renamed(const GgufFile& g,
                                                       const std::function<std::optional<std::string>(const std::string&)>& to_hf,
                                                       const std::string& arch, const std::vector<std::string>& index_tables) {
  const std::string unknown = "not part of the " + arch + " architecture g4 knows";
  for (const auto& [name, t] : g.int_tensors())
    if (std::find(index_tables.begin(), index_tables.end(), name) == index_tables.end())
      throw Error(g.path().string() + ": unknown integer tensor '" + name + "' " + shape_str(t.shape) + ": " + unknown);
  std::map<std::string, TensorView> out;
  for (const auto& [name, view] : g.tensors()) {
    if (name == "rope_freqs.weight") continue;  // checked against the config by config_from_gguf
    auto hf = to_hf(name);
    if (!hf)
      throw Error(g.path().string() + ": unknown tensor '" + name + "' " + shape_str(view.shape) + " (data at byte " +
                  std::to_string(view.file_offset) + "): " + unknown);
    TensorView v = view;
    v.name = *hf;
    out.emplace(*hf, std::move(v));
  }
  return out;
}

std::map<std::string, TensorView> gguf_tensors_as_hf(const GgufFile& g) {
  return gguf_tensors_renamed(g, gguf_to_hf_name, "gemma4");
}

ModelWeights bind_gguf_weights(const ModelConfig& c, const GgufFile& g, std::map<std::string, TensorView>& storage) {
  storage = gguf_tensors_as_hf(g);
  try {
    return bind_weights(c, storage, g.path().string());
  } catch (const Error& e) {
    // Name the GGUF tensor (and where its data is) next to each HF name the message quotes.
    std::string msg = e.what(), out;
    size_t pos = 0;
    while (true) {
      const size_t a = msg.find('\'', pos);
      const size_t b = a == std::string::npos ? a : msg.find('\'', a + 1);
      if (b == std::string::npos) break;
      const std::string q = msg.substr(a + 1, b - a - 1);
      out += msg.substr(pos, a - pos);
      if (auto gg = hf_to_gguf_name(q)) {
        auto it = g.tensors().find(*gg);
        out += "'" + *gg + "' (HF " + q + (it != g.tensors().end() ? ", data at byte " + std::to_string(it->second.file_offset) : "") + ")";
      } else {
        out += msg.substr(a, b - a + 1);
      }
      pos = b + 1;
    }
    out += msg.substr(pos);
    if (out.find("shape") != std::string::npos) out += " [shapes are row-major [out, in]: GGUF ne order reversed]";
    throw Error(out);
  }
}

}  // namespace g4
