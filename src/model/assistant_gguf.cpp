#include "model/assistant_gguf.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "platform/error.h"

namespace g4 {

namespace {

const std::string kArch = "gemma4-assistant";

// Tensors outside the decoder layers (GGUF name, safetensors name).
const std::vector<std::pair<std::string, std::string>> kDrafterGlobal = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"nextn.pre_projection.weight", "pre_projection.weight"},
    {"nextn.post_projection.weight", "post_projection.weight"},
    {"masked_embd_centroids.weight", "masked_embedding.centroids.weight"},
};
// A drafter layer's tensors (after "blk.N."): Q-only attention, no K/V projections or k_norm.
const std::vector<std::string> kDrafterLayer = {
    "attn_norm.weight", "attn_q.weight",  "attn_q_norm.weight", "attn_output.weight", "post_attention_norm.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight",      "ffn_down.weight",    "post_ffw_norm.weight",
    "layer_output_scale.weight"};

// True when `name` is blk.N.<one of kDrafterLayer>.
bool drafter_layer_tensor(const std::string& name) {
  const size_t dot = name.find('.', 4);
  return dot != std::string::npos &&
         std::find(kDrafterLayer.begin(), kDrafterLayer.end(), name.substr(dot + 1)) != kDrafterLayer.end();
}

std::string key_at(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  return g.path().string() + ": metadata '" + key + "'" + (v ? " (byte " + std::to_string(v->offset) + ")" : "");
}

}  // namespace

AssistantConfig assistant_config_from_gguf(const GgufFile& g) {
  AssistantConfig d;
  d.text = config_from_gguf(g, kArch);
  for (LayerPlan& p : d.text.layers) p.kv_shared = true;  // Q only: the target's K/V
  const auto out = g.get_int(kArch + ".embedding_length_out");
  if (!out) throw Error(key_at(g, kArch + ".embedding_length_out") + ": required key is missing (the target's hidden size)");
  if (*out < 1 || *out > (1ll << 31) - 1) throw Error(key_at(g, kArch + ".embedding_length_out") + " = " + std::to_string(*out) + " is out of range");
  d.backbone_hidden_size = int(*out);
  if (auto n = g.get_int(kArch + ".nextn_predict_layers"); n && *n != d.text.num_hidden_layers)
    throw Error(key_at(g, kArch + ".nextn_predict_layers") + " = " + std::to_string(*n) + ", expected block_count = " +
                std::to_string(d.text.num_hidden_layers) + " (every drafter layer runs each step)");
  const auto& T = g.tensors();
  const auto centroids = T.find("masked_embd_centroids.weight");
  const bool ordering = g.int_tensors().count(kGgufTokenOrdering) > 0;
  if (ordering != (centroids != T.end()))
    throw Error(g.path().string() + ": the centroid head needs both 'masked_embd_centroids.weight' and '" +
                kGgufTokenOrdering + "'; the file has only " +
                (ordering ? std::string(kGgufTokenOrdering) : std::string("masked_embd_centroids.weight")));
  d.use_ordered_embeddings = ordering;
  if (!ordering) return d;
  const TensorView& c = centroids->second;
  if (c.shape.size() != 2 || c.shape[0] < 1 || c.shape[0] > d.text.vocab_size)
    throw Error(c.file + ": tensor 'masked_embd_centroids.weight' (data at byte " + std::to_string(c.file_offset) +
                ") has shape " + shape_str(c.shape) + ", expected [centroids, " + std::to_string(d.text.hidden_size) + "]");
  d.num_centroids = int(c.shape[0]);
  if (d.text.vocab_size % d.num_centroids)
    throw Error(c.file + ": " + std::to_string(d.num_centroids) + " centroids do not divide the vocabulary (" +
                std::to_string(d.text.vocab_size) + ")");
  if (auto k = g.get_int(kArch + ".centroid_intermediate_top_k")) {
    if (*k < 1 || *k > d.num_centroids)
      throw Error(key_at(g, kArch + ".centroid_intermediate_top_k") + " = " + std::to_string(*k) + " must be in [1, " +
                  std::to_string(d.num_centroids) + "]");
    d.centroid_intermediate_top_k = int(*k);
  } else {
    d.centroid_intermediate_top_k = std::min(32, d.num_centroids);
    d.text.notes.push_back("no centroid_intermediate_top_k key: keeping the top " +
                           std::to_string(d.centroid_intermediate_top_k) + " centroids, as the released drafters do");
  }
  return d;
}

std::map<std::string, TensorView> assistant_gguf_tensors_as_hf(const GgufFile& g) {
  const std::string layer_prefix = "model.language_model.layers.";
  const auto to_hf = [&](const std::string& name) -> std::optional<std::string> {
    for (const auto& [gg, st] : kDrafterGlobal)
      if (name == gg) return st;
    if (name.rfind("blk.", 0) != 0 || !drafter_layer_tensor(name)) return std::nullopt;
    auto target_name = gguf_to_hf_name(name);  // the target's layer names, under its prefix
    if (!target_name || target_name->rfind(layer_prefix, 0) != 0) return std::nullopt;
    return "model.layers." + target_name->substr(layer_prefix.size());
  };
  return gguf_tensors_renamed(g, to_hf, kArch, {kGgufTokenOrdering});
}

std::optional<std::string> assistant_gguf_name(const std::string& st) {
  for (const auto& [gg, name] : kDrafterGlobal)
    if (st == name) return gg;
  const std::string head = "model.layers.";
  if (st.rfind(head, 0) != 0) return std::nullopt;
  auto gg = hf_to_gguf_name("model.language_model.layers." + st.substr(head.size()));
  if (!gg || !drafter_layer_tensor(*gg)) return std::nullopt;
  return gg;
}

}  // namespace g4
