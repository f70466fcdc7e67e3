#include "gpu_model/gemma4_gpu.h"

#include <cmath>
#include <memory>

#include "model/gemma4.h"
#include "ops/ref/reference_ops.h"
#include "platform/error.h"

namespace g4 {

gpu::GpuDecoderSpec gpu_decoder_spec(const Model& m) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  if (c.hidden_activation != "gelu_pytorch_tanh")
    throw Error("gpu decoder: hidden_activation " + c.hidden_activation + " has no shader (gelu_pytorch_tanh only)");
  gpu::GpuDecoderSpec s;
  s.vocab = c.vocab_size, s.hidden = c.hidden_size, s.heads = c.num_attention_heads;
  s.sliding_window = c.sliding_window;
  s.rms_eps = float(c.rms_norm_eps);
  if (c.final_logit_softcapping) s.softcap = float(*c.final_logit_softcapping);
  s.embed_scale = blocks::embedding_scale(c.hidden_size, w.dtype);
  s.embed_tokens = w.embed_tokens, s.lm_head = w.lm_head, s.final_norm = w.final_norm;
  if (c.has_ple()) {
    s.ple_width = c.hidden_size_per_layer_input;
    s.ple_vocab = c.vocab_size_per_layer_input;
    s.ple_embed_scale = blocks::embedding_scale(s.ple_width, w.embed_per_layer->dtype);
    s.ple_proj_scale = float(1.0 / std::sqrt(double(c.hidden_size)));
    s.embed_per_layer = w.embed_per_layer;
    s.per_layer_model_projection = w.per_layer_model_projection;
    s.per_layer_projection_norm = w.per_layer_projection_norm;
  }
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerPlan& p = c.layers[i];
    const LayerWeights& lw = w.layers[i];
    gpu::GpuLayerSpec l;
    l.full = p.type == LayerType::Full;
    l.head_dim = p.head_dim, l.kv_heads = p.kv_heads;
    l.kv_shared = p.kv_shared, l.kv_source = p.kv_source_layer;
    l.layer_scalar = lw.layer_scalar->at(0);
    l.input_norm = lw.input_norm, l.post_attention_norm = lw.post_attention_norm;
    l.pre_feedforward_norm = lw.pre_feedforward_norm, l.post_feedforward_norm = lw.post_feedforward_norm;
    l.q_proj = lw.q_proj, l.q_norm = lw.q_norm, l.k_proj = lw.k_proj, l.k_norm = lw.k_norm, l.v_proj = lw.v_proj;
    l.o_proj = lw.o_proj;
    l.gate_proj = lw.gate_proj, l.up_proj = lw.up_proj, l.down_proj = lw.down_proj;
    l.ple_input_gate = lw.ple_input_gate, l.ple_projection = lw.ple_projection, l.ple_post_norm = lw.ple_post_norm;
    if (p.moe) {
      l.moe = true, l.top_k = c.top_k_experts;
      const float hs = float(1.0 / std::sqrt(double(c.hidden_size)));
      for (int64_t k = 0; k < c.hidden_size; ++k) l.router_input_scale.push_back(lw.router_scale->at(k) * hs);
      l.router_proj = lw.router_proj, l.router_per_expert_scale = lw.router_per_expert_scale;
      l.experts_gate_up = lw.experts_gate_up, l.experts_down = lw.experts_down;
      l.pre_feedforward_norm_2 = lw.pre_feedforward_norm_2, l.post_feedforward_norm_1 = lw.post_feedforward_norm_1;
      l.post_feedforward_norm_2 = lw.post_feedforward_norm_2;
    }
    s.layers.push_back(l);
  }
  // The reference's inverse frequencies and its cos/sin formula (ref::rope_cos_sin): same bits.
  auto rope = std::make_shared<blocks::RopeTables>(c);
  s.rope_angles = [rope](bool full, int64_t pos, float* cos, float* sin) {
    ref::rope_cos_sin(full ? rope->full : rope->sliding, pos, cos, sin);
  };
  return s;
}

}  // namespace g4
