#include "model/vision_weights.h"

#include <cmath>
#include <set>

#include "platform/error.h"

namespace g4 {

namespace {

// Binds tensors under one prefix by relative name, checking shapes and counting what it binds.
class VisionBinder {
 public:
  VisionBinder(const std::map<std::string, TensorView>& t, std::string prefix, std::string source, VisionWeights& w)
      : tensors_(t), prefix_(std::move(prefix)), source_(std::move(source)), w_(w) {}

  const TensorView* need(const std::string& rel, const std::vector<int64_t>& shape) {
    const TensorView* t = lookup(rel);
    if (!t)
      throw Error(source_ + ": missing tensor '" + prefix_ + rel + "' (expected shape " + shape_str(shape) + ")");
    if (t->shape != shape)
      throw Error(t->file + ": tensor '" + t->name + "' has shape " + shape_str(t->shape) + ", expected " +
                  shape_str(shape) + " from vision_config");
    count(t);
    return t;
  }
  // A 0-d clamp bound (shape [], or [1] as llama.cpp's converter writes it), as a float.
  float scalar(const std::string& rel) {
    const TensorView* t = lookup(rel);
    if (!t) throw Error(source_ + ": missing tensor '" + prefix_ + rel + "' (expected shape [] : use_clipped_linears is true)");
    if (!(t->shape.empty() || t->shape == std::vector<int64_t>{1}))
      throw Error(t->file + ": tensor '" + t->name + "' has shape " + shape_str(t->shape) +
                  ", expected [] (a scalar clamp bound)");
    count(t);
    const float v = t->at(0);
    if (std::isnan(v)) throw Error(t->file + ": tensor '" + t->name + "' is NaN: not a clamp bound");
    return v;
  }
  bool has(const std::string& rel) const { return lookup(rel) != nullptr; }
  void skip(const std::string& rel) {
    if (const TensorView* t = lookup(rel)) seen_.insert(t->name);
  }
  bool seen(const std::string& name) const { return seen_.count(name) > 0; }

 private:
  const TensorView* lookup(const std::string& rel) const {
    auto it = tensors_.find(prefix_ + rel);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  void count(const TensorView* t) {
    if (!seen_.insert(t->name).second) return;
    w_.bound_bytes += t->nbytes;
    w_.parameter_count += uint64_t(t->numel());
  }
  const std::map<std::string, TensorView>& tensors_;
  std::string prefix_, source_;
  VisionWeights& w_;
  std::set<std::string> seen_;
};

const char* const kClampNames[] = {"input_min", "input_max", "output_min", "output_max"};

// `<rel>.linear.weight` [out, in] and, when the tower clips, its four bounds. Without clipping
// a checkpoint's bounds are ignored, as transformers ignores them (the module has no buffers).
ClippedLinear bind_linear(const VisionConfig& c, VisionBinder& b, const std::string& rel, int64_t out, int64_t in,
                          int& ignored_bounds) {
  ClippedLinear l;
  l.weight = b.need(rel + ".linear.weight", {out, in});
  if (!c.use_clipped_linears) {
    for (const char* n : kClampNames)
      if (b.has(rel + "." + n)) {
        b.skip(rel + "." + n);
        ++ignored_bounds;
      }
    return l;
  }
  l.clipped = true;
  l.input_min = b.scalar(rel + ".input_min");
  l.input_max = b.scalar(rel + ".input_max");
  l.output_min = b.scalar(rel + ".output_min");
  l.output_max = b.scalar(rel + ".output_max");
  if (l.input_min > l.input_max || l.output_min > l.output_max)
    throw Error("tensor '" + rel + "': clamp bounds out of order (input [" + std::to_string(l.input_min) + ", " +
                std::to_string(l.input_max) + "], output [" + std::to_string(l.output_min) + ", " +
                std::to_string(l.output_max) + "])");
  return l;
}

VisionLayerWeights bind_vision_layer(const VisionConfig& c, VisionBinder& b, int i, int& ignored_bounds) {
  const std::string l = "vision_tower.encoder.layers." + std::to_string(i) + ".";
  const int64_t Hv = c.hidden_size, Iv = c.intermediate_size, d = c.head_dim;
  VisionLayerWeights lw;
  lw.input_norm = b.need(l + "input_layernorm.weight", {Hv});
  lw.post_attention_norm = b.need(l + "post_attention_layernorm.weight", {Hv});
  lw.pre_feedforward_norm = b.need(l + "pre_feedforward_layernorm.weight", {Hv});
  lw.post_feedforward_norm = b.need(l + "post_feedforward_layernorm.weight", {Hv});
  lw.q_proj = bind_linear(c, b, l + "self_attn.q_proj", c.q_width(), Hv, ignored_bounds);
  lw.k_proj = bind_linear(c, b, l + "self_attn.k_proj", c.kv_width(), Hv, ignored_bounds);
  lw.v_proj = bind_linear(c, b, l + "self_attn.v_proj", c.kv_width(), Hv, ignored_bounds);
  lw.o_proj = bind_linear(c, b, l + "self_attn.o_proj", Hv, c.q_width(), ignored_bounds);
  lw.q_norm = b.need(l + "self_attn.q_norm.weight", {d});
  lw.k_norm = b.need(l + "self_attn.k_norm.weight", {d});
  lw.gate_proj = bind_linear(c, b, l + "mlp.gate_proj", Iv, Hv, ignored_bounds);
  lw.up_proj = bind_linear(c, b, l + "mlp.up_proj", Iv, Hv, ignored_bounds);
  lw.down_proj = bind_linear(c, b, l + "mlp.down_proj", Hv, Iv, ignored_bounds);
  return lw;
}

// Where the vision tensors sit: "model." in released checkpoints, or at the top level.
std::string vision_prefix(const std::map<std::string, TensorView>& tensors) {
  if (tensors.count("vision_tower.patch_embedder.input_proj.weight") &&
      !tensors.count("model.vision_tower.patch_embedder.input_proj.weight"))
    return "";
  return "model.";
}

// Any other tensor of the tower or projector means the config and checkpoint disagree.
void check_unbound_vision(const std::map<std::string, TensorView>& tensors, const std::string& prefix,
                          const VisionBinder& b) {
  for (const auto& [name, t] : tensors) {
    if (b.seen(name)) continue;
    if (name.rfind(prefix + "vision_tower.", 0) == 0 || name.rfind(prefix + "embed_vision.", 0) == 0)
      throw Error(t.file + ": unexpected tensor '" + name + "' " + shape_str(t.shape) +
                  ": vision_config does not account for it");
  }
}

}  // namespace

VisionWeights bind_vision_weights(const VisionConfig& c, int64_t text_hidden,
                                  const std::map<std::string, TensorView>& tensors, const std::string& source) {
  VisionWeights w;
  const std::string prefix = vision_prefix(tensors);
  VisionBinder b(tensors, prefix, source, w);
  const int64_t Hv = c.hidden_size;
  w.input_proj = b.need("vision_tower.patch_embedder.input_proj.weight", {Hv, c.patch_width()});
  w.position_table = b.need("vision_tower.patch_embedder.position_embedding_table", {2, c.position_embedding_size, Hv});
  int ignored_bounds = 0;
  for (int i = 0; i < c.num_hidden_layers; ++i) w.layers.push_back(bind_vision_layer(c, b, i, ignored_bounds));
  if (c.standardize) {
    w.std_bias = b.need("vision_tower.std_bias", {Hv});
    w.std_scale = b.need("vision_tower.std_scale", {Hv});
  } else {
    b.skip("vision_tower.std_bias");
    b.skip("vision_tower.std_scale");
    if (b.has("vision_tower.std_bias") || b.has("vision_tower.std_scale"))
      w.notes.push_back("std_bias/std_scale present but standardize is false: not used");
  }
  w.embedding_projection = b.need("embed_vision.embedding_projection.weight", {text_hidden, Hv});
  if (ignored_bounds)
    w.notes.push_back(std::to_string(ignored_bounds) + " clamp bounds present but use_clipped_linears is false: not used");
  check_unbound_vision(tensors, prefix, b);
  return w;
}

}  // namespace g4
