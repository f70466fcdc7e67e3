// What the GPU decoder (src/gpu/vulkan/vk_decoder.h) needs to run a Gemma 4 text decoder, in
// platform types only: the dimensions and flags of each layer and views of the weight tensors.
// src/gpu knows no model; src/gpu_model/gemma4_gpu.h builds this from a loaded Model, with the
// model layer's own numbers (embedding scales, RoPE angles) so the two paths share their bits.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "platform/tensor_view.h"

namespace g4::gpu {

struct GpuLayerSpec {
  bool full = false;      // full attention (else sliding, window GpuDecoderSpec::sliding_window)
  int head_dim = 0;       // hd
  int kv_heads = 0;       // kvh
  int kv_source = 0;      // the layer whose KV buffer this one reads (== own index unless shared)
  bool kv_shared = false; // no k/v projections: reads kv_source's buffer
  float layer_scalar = 1.0f;
  // [H] norms; q_norm/k_norm [hd]; projections [out, in]. k_proj/k_norm null when KV-shared,
  // v_proj null there and on K=V layers (V = v_norm of the raw k projection).
  const TensorView *input_norm = nullptr, *post_attention_norm = nullptr, *pre_feedforward_norm = nullptr,
                   *post_feedforward_norm = nullptr;
  const TensorView *q_proj = nullptr, *q_norm = nullptr, *k_proj = nullptr, *k_norm = nullptr, *v_proj = nullptr,
                   *o_proj = nullptr;
  const TensorView *gate_proj = nullptr, *up_proj = nullptr, *down_proj = nullptr;  // [I, H], [I, H], [H, I]
  // Per-layer embeddings (P > 0): gate [P, H], projection [H, P], post norm [H].
  const TensorView *ple_input_gate = nullptr, *ple_projection = nullptr, *ple_post_norm = nullptr;
  // Mixture of experts (moe): the router reads RMSNorm(residual) · router_input_scale, the
  // experts pre_feedforward_norm_2(residual); the outputs are post_feedforward_norm_1(dense) +
  // post_feedforward_norm_2(experts), then post_feedforward_norm.
  bool moe = false;
  int top_k = 0;
  std::vector<float> router_input_scale;  // [H]: router.scale[i] · H^-1/2, as the reference forms it
  const TensorView *router_proj = nullptr, *router_per_expert_scale = nullptr;  // [E, H], [E]
  const TensorView *experts_gate_up = nullptr, *experts_down = nullptr;        // [E, 2·I_e, H], [E, H, I_e]
  const TensorView *pre_feedforward_norm_2 = nullptr, *post_feedforward_norm_1 = nullptr,
                   *post_feedforward_norm_2 = nullptr;
};

struct GpuDecoderSpec {
  int vocab = 0, hidden = 0, heads = 0;  // V, H, nH
  int sliding_window = 0;
  float rms_eps = 1e-6f;
  std::optional<float> softcap;
  float embed_scale = 1.0f;  // sqrt(H) rounded as the reference rounds it
  const TensorView *embed_tokens = nullptr, *lm_head = nullptr, *final_norm = nullptr;  // [V, H], [V, H], [H]
  // Per-layer embeddings: P = 0 disables them.
  int ple_width = 0;            // P
  int ple_vocab = 0;            // rows of embed_per_layer
  float ple_embed_scale = 1.0f; // sqrt(P), rounded like embed_scale
  float ple_proj_scale = 1.0f;  // H^-1/2
  const TensorView *embed_per_layer = nullptr, *per_layer_model_projection = nullptr,
                   *per_layer_projection_norm = nullptr;  // [V_ple, L*P], [L*P, H], [P]
  std::vector<GpuLayerSpec> layers;
  // cos and sin ([head_dim/2] each) of a full or sliding layer's RoPE angles at position pos.
  std::function<void(bool full, int64_t pos, float* cos, float* sin)> rope_angles;
};

}  // namespace g4::gpu
