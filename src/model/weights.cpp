#include "model/weights.h"

#include <algorithm>
#include <set>

#include "platform/error.h"

namespace g4 {

namespace {

class Binder {
 public:
  Binder(const std::map<std::string, TensorView>& t, std::string prefix, std::string source, ModelWeights& w)
      : tensors_(t), prefix_(std::move(prefix)), source_(std::move(source)), w_(w) {}

  // Required tensor with an exact shape.
  const TensorView* need(const std::string& rel, std::vector<int64_t> shape) {
    const TensorView* t = lookup(rel);
    if (!t)
      throw Error(source_ + ": missing tensor '" + prefix_ + rel + "' (expected shape " + shape_str(shape) + ")");
    return check(t, shape);
  }
  // Tensor the config says must not be there.
  void forbid(const std::string& rel, const std::string& why) {
    if (const TensorView* t = lookup(rel))
      throw Error(t->file + ": unexpected tensor '" + t->name + "' " + shape_str(t->shape) + ": " + why);
  }
  // Present-but-unused copies (k/v on shared layers): accepted, never bound.
  void tolerate(const std::string& rel) {
    if (const TensorView* t = lookup(rel)) {
      seen_.insert(t->name);
      ++ignored_;
    }
  }
  const TensorView* optional(const std::string& rel, std::vector<int64_t> shape) {
    const TensorView* t = lookup(rel);
    return t ? check(t, shape) : nullptr;
  }
  const std::set<std::string>& seen() const { return seen_; }
  int ignored() const { return ignored_; }

 private:
  const TensorView* lookup(const std::string& rel) const {
    auto it = tensors_.find(prefix_ + rel);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const TensorView* check(const TensorView* t, const std::vector<int64_t>& shape) {
    if (t->shape != shape)
      throw Error(t->file + ": tensor '" + t->name + "' has shape " + shape_str(t->shape) + ", expected " +
                  shape_str(shape) + " from the config");
    if (seen_.insert(t->name).second) {
      w_.bound_bytes += t->nbytes;
      w_.bound_tensors += 1;
      w_.bytes_by_dtype[std::string(dtype_name(t->dtype))] += t->nbytes;
      w_.parameter_count += uint64_t(t->numel());
    }
    return t;
  }
  const std::map<std::string, TensorView>& tensors_;
  std::string prefix_, source_;
  ModelWeights& w_;
  std::set<std::string> seen_;
  int ignored_ = 0;
};

bool is_other_tower(const std::string& name) {
  for (const char* p : {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio.",
                        "vision_tower.", "audio_tower.", "multi_modal_projector."})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

// The steps of bind_weights, in the order it checks the checkpoint.

// The prefix the text decoder's tensors share ("model.language_model." in released checkpoints).
std::string text_prefix(const std::map<std::string, TensorView>& tensors, const std::string& source) {
  for (const char* p : {"model.language_model.", "language_model.model.", "language_model.", "model."})
    if (tensors.count(std::string(p) + "embed_tokens.weight")) return p;
  if (tensors.count("embed_tokens.weight")) return "";
  throw Error(source + ": no text decoder found: none of model.language_model., language_model., model. holds "
                       "embed_tokens.weight (" + std::to_string(tensors.size()) + " tensors in the checkpoint)");
}

// lm_head: optional; when tied the embedding is the head (a shipped copy is ignored).
void bind_head(const ModelConfig& c, const std::map<std::string, TensorView>& tensors, const std::string& source,
               ModelWeights& w) {
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const TensorView* head = nullptr;
  for (const std::string& name : {std::string("lm_head.weight"), w.prefix + "lm_head.weight"}) {
    auto it = tensors.find(name);
    if (it == tensors.end()) continue;
    if (it->second.shape != std::vector<int64_t>{V, H})
      throw Error(it->second.file + ": tensor '" + name + "' has shape " + shape_str(it->second.shape) +
                  ", expected " + shape_str({V, H}));
    head = &it->second;
  }
  if (c.tie_word_embeddings || !head) {
    if (!c.tie_word_embeddings)
      throw Error(source + ": tie_word_embeddings is false but no lm_head.weight is present");
    w.lm_head = w.embed_tokens;
    if (head) w.notes.push_back("lm_head.weight present but tied to embed_tokens: the copy is not used");
  } else {
    w.lm_head = head;
    w.bound_bytes += head->nbytes;
    w.bytes_by_dtype[std::string(dtype_name(head->dtype))] += head->nbytes;
    w.parameter_count += uint64_t(head->numel());
  }
}

void bind_per_layer_embeddings(const ModelConfig& c, Binder& b, ModelWeights& w) {
  const int64_t H = c.hidden_size, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input;
  if (P > 0) {
    w.embed_per_layer = b.need("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, L * P});
    w.per_layer_model_projection = b.need("per_layer_model_projection.weight", {L * P, H});
    w.per_layer_projection_norm = b.need("per_layer_projection_norm.weight", {P});
  } else {
    b.forbid("embed_tokens_per_layer.weight", "hidden_size_per_layer_input is 0 (no per-layer embeddings)");
  }
}

// Norms and projections of attention layer `l` ("layers.N.").
void bind_attention(const ModelConfig& c, const LayerPlan& p, const std::string& l, Binder& b, LayerWeights& lw) {
  const int64_t H = c.hidden_size;
  const int64_t hd = p.head_dim, q_out = int64_t(c.num_attention_heads) * hd, kv_out = int64_t(p.kv_heads) * hd;
  lw.input_norm = b.need(l + "input_layernorm.weight", {H});
  lw.post_attention_norm = b.need(l + "post_attention_layernorm.weight", {H});
  lw.pre_feedforward_norm = b.need(l + "pre_feedforward_layernorm.weight", {H});
  lw.post_feedforward_norm = b.need(l + "post_feedforward_layernorm.weight", {H});
  lw.q_proj = b.need(l + "self_attn.q_proj.weight", {q_out, H});
  lw.q_norm = b.need(l + "self_attn.q_norm.weight", {hd});
  lw.o_proj = b.need(l + "self_attn.o_proj.weight", {H, q_out});
  if (p.kv_shared) {
    // Some exports ship k/v/k_norm on shared layers; the reference ignores them, so do we.
    b.tolerate(l + "self_attn.k_proj.weight");
    b.tolerate(l + "self_attn.v_proj.weight");
    b.tolerate(l + "self_attn.k_norm.weight");
  } else {
    lw.k_proj = b.need(l + "self_attn.k_proj.weight", {kv_out, H});
    lw.k_norm = b.need(l + "self_attn.k_norm.weight", {hd});
    if (p.k_eq_v)
      b.forbid(l + "self_attn.v_proj.weight", "attention_k_eq_v is true, so full layers take V from k_proj");
    else
      lw.v_proj = b.need(l + "self_attn.v_proj.weight", {kv_out, H});
  }
  b.forbid(l + "self_attn.v_norm.weight", "v_norm has no weight in Gemma 4");
}

// MLP, layer scalar, per-layer-input and MoE tensors of layer `l`.
void bind_feed_forward(const ModelConfig& c, const LayerPlan& p, const std::string& l, Binder& b, LayerWeights& lw) {
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input;
  lw.gate_proj = b.need(l + "mlp.gate_proj.weight", {p.mlp_width, H});
  lw.up_proj = b.need(l + "mlp.up_proj.weight", {p.mlp_width, H});
  lw.down_proj = b.need(l + "mlp.down_proj.weight", {H, p.mlp_width});
  lw.layer_scalar = b.need(l + "layer_scalar", {1});
  if (P > 0) {
    lw.ple_input_gate = b.need(l + "per_layer_input_gate.weight", {P, H});
    lw.ple_projection = b.need(l + "per_layer_projection.weight", {H, P});
    lw.ple_post_norm = b.need(l + "post_per_layer_input_norm.weight", {H});
  }
  if (p.moe) {
    const int64_t E = c.num_experts, Ie = c.moe_intermediate_size;
    lw.router_proj = b.need(l + "router.proj.weight", {E, H});
    lw.router_scale = b.need(l + "router.scale", {H});
    lw.router_per_expert_scale = b.need(l + "router.per_expert_scale", {E});
    lw.experts_gate_up = b.need(l + "experts.gate_up_proj", {E, 2 * Ie, H});
    lw.experts_down = b.need(l + "experts.down_proj", {E, H, Ie});
    lw.pre_feedforward_norm_2 = b.need(l + "pre_feedforward_layernorm_2.weight", {H});
    lw.post_feedforward_norm_1 = b.need(l + "post_feedforward_layernorm_1.weight", {H});
    lw.post_feedforward_norm_2 = b.need(l + "post_feedforward_layernorm_2.weight", {H});
  }
}

// Anything else under the text prefix is a sign the config and checkpoint disagree; other
// towers and tensors outside the prefix are noted and ignored.
void check_unbound(const std::map<std::string, TensorView>& tensors, const Binder& b, ModelWeights& w) {
  int towers = 0;
  for (const auto& [name, t] : tensors) {
    if (b.seen().count(name) || name == "lm_head.weight" || name == w.prefix + "lm_head.weight") continue;
    if (is_other_tower(name)) {
      ++towers;
      continue;
    }
    if (!w.prefix.empty() && name.rfind(w.prefix, 0) != 0) {
      w.notes.push_back("ignored tensor outside the text decoder: " + name);
      continue;
    }
    throw Error(t.file + ": unexpected tensor '" + name + "' " + shape_str(t.shape) +
                " under the text decoder prefix: the config does not account for it");
  }
  if (towers) w.notes.push_back(std::to_string(towers) + " vision/audio tower tensors ignored");
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const std::map<std::string, TensorView>& tensors,
                          const std::string& source) {
  ModelWeights w;
  w.prefix = text_prefix(tensors, source);
  const int64_t H = c.hidden_size, V = c.vocab_size;
  Binder b(tensors, w.prefix, source, w);
  w.embed_tokens = b.need("embed_tokens.weight", {V, H});
  w.dtype = w.embed_tokens->dtype;
  w.final_norm = b.need("norm.weight", {H});
  bind_head(c, tensors, source, w);
  bind_per_layer_embeddings(c, b, w);
  w.layers.resize(size_t(c.num_hidden_layers));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    bind_attention(c, c.layers[size_t(i)], l, b, w.layers[size_t(i)]);
    bind_feed_forward(c, c.layers[size_t(i)], l, b, w.layers[size_t(i)]);
  }
  if (b.ignored()) w.notes.push_back(std::to_string(b.ignored()) + " k/v/k_norm tensors on KV-shared layers accepted and not used");
  check_unbound(tensors, b, w);
  return w;
}

std::vector<const TensorView**> streamed_matrices(ModelWeights& w) {
  std::vector<const TensorView**> out;
  out.push_back(&w.lm_head);
  out.push_back(&w.per_layer_model_projection);
  for (LayerWeights& lw : w.layers)
    for (const TensorView** t : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj, &lw.up_proj, &lw.down_proj,
                                 &lw.ple_input_gate, &lw.ple_projection, &lw.router_proj, &lw.experts_gate_up,
                                 &lw.experts_down})
      out.push_back(t);
  std::erase_if(out, [](const TensorView** t) { return *t == nullptr; });
  return out;
}

std::vector<ReadRange> decode_weight_reads(ModelWeights& w, const ModelConfig& c) {
  std::vector<const TensorView**> order = streamed_matrices(w);
  // streamed_matrices lists the head first; decode reads it last.
  if (!order.empty() && order.front() == &w.lm_head) std::rotate(order.begin(), order.begin() + 1, order.end());
  std::set<const TensorView**> experts;
  for (LayerWeights& lw : w.layers) experts.insert({&lw.experts_gate_up, &lw.experts_down});
  std::vector<ReadRange> out;
  for (const TensorView** slot : order) {
    const TensorView& t = **slot;
    const uint64_t bytes = experts.count(slot) ? t.nbytes / uint64_t(c.num_experts) * uint64_t(c.top_k_experts) : t.nbytes;
    out.push_back({t.data, bytes});
  }
  return out;
}

}  // namespace g4
