#include "model/vision_gguf.h"

#include <utility>
#include <vector>

#include "platform/error.h"

namespace g4 {

namespace {

// (GGUF name after "v.blk.N.", HF name after "model.vision_tower.encoder.layers.N.").
const std::vector<std::pair<std::string, std::string>> kMmprojLayer = {
    {"ln1.weight", "input_layernorm.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_post_norm.weight", "post_attention_layernorm.weight"},
    {"ln2.weight", "pre_feedforward_layernorm.weight"},  // llama.cpp's "ln2" is the pre-FFW norm
    {"ffn_post_norm.weight", "post_feedforward_layernorm.weight"},
};
// The clipped linears: GGUF stem -> HF module; each has .weight and the four clamp bounds.
const std::vector<std::pair<std::string, std::string>> kMmprojLinear = {
    {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
    {"attn_out", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
const std::vector<std::pair<std::string, std::string>> kMmprojGlobal = {
    {"v.patch_embd.weight", "model.vision_tower.patch_embedder.input_proj.weight"},
    {"v.position_embd.weight", "model.vision_tower.patch_embedder.position_embedding_table"},
    {"v.std_bias", "model.vision_tower.std_bias"},
    {"v.std_scale", "model.vision_tower.std_scale"},
    {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight"},
};

// "v.blk.12.rest" -> (12, "rest").
bool split_vision_layer(const std::string& name, int& layer, std::string& rest) {
  const std::string head = "v.blk.";
  if (name.rfind(head, 0) != 0) return false;
  size_t j = head.size();
  while (j < name.size() && j - head.size() < 6 && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == head.size() || j >= name.size() || name[j] != '.') return false;
  layer = std::stoi(name.substr(head.size(), j - head.size()));
  rest = name.substr(j + 1);
  return true;
}

const TensorView& mmproj_tensor(const GgufFile& g, const std::string& name) {
  auto it = g.tensors().find(name);
  if (it == g.tensors().end()) throw Error(g.path().string() + ": missing tensor '" + name + "' (a gemma4v mmproj has it)");
  return it->second;
}

int mmproj_int(const GgufFile& g, const std::string& key) {
  const std::optional<int64_t> v = g.get_int(key);
  if (!v) throw Error(g.path().string() + ": missing metadata '" + key + "' (a gemma4v mmproj has it)");
  if (*v < 1 || *v > (int64_t(1) << 31) - 1)
    throw Error(g.path().string() + ": metadata '" + key + "' = " + std::to_string(*v) + ": out of range");
  return int(*v);
}

// The tower's patch embedding [Hv, p·p·3] ((row, column, channel) per patch) from the
// converter's conv weight [Hv, 3, p, p], as f32 in memory the model owns.
void unpermute_patch_embedding(VisionModel& m) {
  TensorView& conv = m.gguf_views.at("model.vision_tower.patch_embedder.input_proj.weight");
  const int64_t p = m.config.patch_size, Hv = m.config.hidden_size;
  if (conv.shape != std::vector<int64_t>{Hv, 3, p, p})
    throw Error(m.gguf->path().string() + ": tensor 'v.patch_embd.weight' has shape " + shape_str(conv.shape) +
                ", expected " + shape_str({Hv, 3, p, p}) + " (row-major; GGUF ne reversed)");
  std::vector<float> src(size_t(Hv * 3 * p * p)), dst(src.size());
  for (int64_t r = 0; r < Hv * 3 * p; ++r) conv.row_to_f32(r, &src[size_t(r * p)]);  // rows of p values
  for (int64_t o = 0; o < Hv; ++o)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < p; ++y)
        for (int64_t x = 0; x < p; ++x)
          dst[size_t(o * 3 * p * p + (y * p + x) * 3 + ch)] = src[size_t(((o * 3 + ch) * p + y) * p + x)];
  m.owned_data.push_back(std::move(dst));
  TensorView v = conv;
  v.dtype = DType::F32;
  v.shape = {Hv, 3 * p * p};
  v.data = reinterpret_cast<const std::byte*>(m.owned_data.back().data());
  v.nbytes = uint64_t(Hv * 3 * p * p) * 4;
  conv = v;
}

}  // namespace

std::optional<std::string> mmproj_to_hf_name(const std::string& n) {
  for (const auto& [gg, hf] : kMmprojGlobal)
    if (n == gg) return hf;
  int layer;
  std::string rest;
  if (!split_vision_layer(n, layer, rest)) return std::nullopt;
  const std::string l = "model.vision_tower.encoder.layers." + std::to_string(layer) + ".";
  for (const auto& [gg, hf] : kMmprojLayer)
    if (rest == gg) return l + hf;
  for (const auto& [gg, hf] : kMmprojLinear) {
    if (rest == gg + ".weight") return l + hf + ".linear.weight";
    for (const char* b : {"input_min", "input_max", "output_min", "output_max"})
      if (rest == gg + "." + b) return l + hf + "." + b;
  }
  return std::nullopt;
}

VisionConfig vision_config_from_mmproj(const GgufFile& g) {
  const std::string file = g.path().string();
  const std::optional<std::string> type = g.get_string("clip.projector_type");
  if (!type || *type != "gemma4v")
    throw Error(file + ": metadata 'clip.projector_type' = " + (type ? "\"" + *type + "\"" : std::string("(absent)")) +
                ": not a Gemma 4 vision projector (expected gemma4v)");
  VisionConfig c;
  c.hidden_size = mmproj_int(g, "clip.vision.embedding_length");
  c.intermediate_size = mmproj_int(g, "clip.vision.feed_forward_length");
  c.num_hidden_layers = mmproj_int(g, "clip.vision.block_count");
  c.num_attention_heads = mmproj_int(g, "clip.vision.attention.head_count");
  c.patch_size = mmproj_int(g, "clip.vision.patch_size");
  c.pooling_kernel_size = g.get_int("clip.vision.projector.scale_factor") ? mmproj_int(g, "clip.vision.projector.scale_factor") : 3;
  c.rms_norm_eps = g.get_float("clip.vision.attention.layer_norm_epsilon").value_or(1e-6);
  c.rope_theta = 100.0;
  const TensorView& q_norm = mmproj_tensor(g, "v.blk.0.attn_q_norm.weight");  // [d]
  c.head_dim = int(q_norm.shape.back());
  if (c.head_dim < 4 || c.head_dim % 4) throw Error(file + ": tensor 'v.blk.0.attn_q_norm.weight' " +
                                                    shape_str(q_norm.shape) + ": head_dim must be a multiple of 4");
  c.num_key_value_heads = int(mmproj_tensor(g, "v.blk.0.attn_k.weight").shape.front() / c.head_dim);
  const TensorView& table = mmproj_tensor(g, "v.position_embd.weight");  // [2, P, Hv]
  if (table.shape.size() != 3) throw Error(file + ": tensor 'v.position_embd.weight' " + shape_str(table.shape) +
                                           ": expected [2, P, Hv]");
  c.position_embedding_size = int(table.shape[1]);
  c.use_clipped_linears = g.tensors().count("v.blk.0.attn_q.input_min") > 0;
  c.standardize = g.tensors().count("v.std_bias") > 0;
  if (c.num_key_value_heads < 1 || c.num_attention_heads % c.num_key_value_heads)
    throw Error(file + ": tensor 'v.blk.0.attn_k.weight' " + shape_str(mmproj_tensor(g, "v.blk.0.attn_k.weight").shape) +
                ": its rows are not a divisor of the query heads times head_dim " + std::to_string(c.head_dim));
  return c;
}

std::unique_ptr<VisionModel> load_vision_mmproj(const std::filesystem::path& file, int64_t text_hidden) {
  auto m = std::make_unique<VisionModel>();
  m->path = file;
  m->format = "gguf";
  m->gguf = GgufFile::open(file);
  m->config = vision_config_from_mmproj(*m->gguf);
  m->text_hidden = text_hidden;
  for (const auto& [name, view] : m->gguf->tensors()) {
    const std::optional<std::string> hf = mmproj_to_hf_name(name);
    if (!hf)
      throw Error(file.string() + ": unknown tensor '" + name + "' " + shape_str(view.shape) + " (data at byte " +
                  std::to_string(view.file_offset) + "): not part of a gemma4v mmproj g4 knows" +
                  (name.find("out_scale") != std::string::npos ? " (transformers' vision layer has no layer scalar)" : ""));
    TensorView v = view;
    v.name = *hf;
    m->gguf_views.emplace(*hf, std::move(v));
  }
  if (m->gguf_views.count("model.vision_tower.patch_embedder.input_proj.weight")) unpermute_patch_embedding(*m);
  try {
    m->weights = bind_vision_weights(m->config, text_hidden, m->gguf_views, file.string());
  } catch (const Error& e) {  // name the GGUF tensor beside the HF name the message quotes
    std::string msg = e.what();
    for (const auto& [name, view] : m->gguf->tensors()) {
      const std::string quoted = "'" + *mmproj_to_hf_name(name) + "'";
      if (const size_t at = msg.find(quoted); at != std::string::npos)
        msg.replace(at, quoted.size(), "'" + name + "' (HF " + quoted.substr(1, quoted.size() - 2) + ")");
    }
    throw Error(msg + " [shapes are row-major: GGUF ne reversed]");
  }
  return m;
}

void infer_image_mask_rule_for_gguf(ModelConfig& c) {
  if (!c.use_bidirectional_attention.empty() || c.has_ple()) return;
  c.use_bidirectional_attention = "vision";
  c.notes.push_back("use_bidirectional_attention: \"vision\" inferred for images (a GGUF does not carry it; the released "
                    "configs without per-layer embeddings, 26B-A4B and 31B, set it)");
}

}  // namespace g4
