// The Gemma 4 forward pass as the spec reads (docs/architecture.md): embeddings, the decoder
// layer (attention block, feed-forward block with the optional mixture of experts, per-layer
// embedding tail) and the head. Shapes: T rows (tokens, each at its own absolute position), H
// hidden, nH query heads, kvh key/value heads, hd head dim, L layers, P per-layer-input width,
// V vocabulary. Every primitive runs through the executor (model/executor.h): the reference
// loops or the SIMD kernels, with the same math. Where keys come from is the caller's: the
// whole-sequence reference (forward_reference.h) and the cached, batched pass
// (forward_cached.h) hand the layer loop their attention.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/executor.h"
#include "model/model.h"
#include "model/soft_tokens.h"

namespace g4::blocks {

// RoPE inverse frequencies for both layer types, once per model; given the step's positions,
// also each row's cos/sin per layer type ([T, hd/2] each), once per step instead of once per
// layer for q and again for k (ref::rope_cos_sin: the same bits as rotating per row).
struct RopeTables {
  std::vector<float> sliding, full;
  struct Angles {
    std::vector<float> cos, sin;  // [T, hd/2]
  };
  Angles sliding_at, full_at;  // empty unless built with positions
  explicit RopeTables(const ModelConfig& c);
  RopeTables(const ModelConfig& c, const std::vector<int64_t>& positions);
  const std::vector<float>& for_layer(const LayerPlan& p) const { return p.type == LayerType::Full ? full : sliding; }
  const Angles& angles_for_layer(const LayerPlan& p) const { return p.type == LayerType::Full ? full_at : sliding_at; }
};

// Embedding scale sqrt(width), rounded to the weight dtype as the reference does (bf16 -> 39.25
// for H = 1536).
float embedding_scale(int64_t width, DType weight_dtype);

// Checks ids against the vocabulary (and the PLE table); throws g4::Error naming the bad one.
void check_tokens(const ModelConfig& c, const std::vector<int>& tokens);

// x = embed_tokens[ids] · sqrt(H) (scale rounded to the weight dtype)            -> [T, H]
Vec embed(const Model& m, const std::vector<int>& tokens);
// The same, except that a row carrying a soft token (spans[t], at positions[t]) takes it as is,
// without the scale. Empty spans: exactly embed(m, tokens).
Vec embed(const Model& m, const std::vector<int>& tokens, const std::vector<int64_t>& positions, const RowSpans& spans);

// Per-layer inputs (P > 0): ((proj(x)·H^-½ → RMSNorm per P slice) + table[ids]·√P) · 2^-½ -> [T, L, P]
Vec per_layer_inputs(const Model& m, const std::vector<int>& tokens, const Vec& x, const Exec& ex);

// h = input_layernorm(x); q = rope(q_norm(q_proj h))                               -> [T, nH, hd]
// Unless KV-shared: k = rope(k_norm(k_proj h)), v = v_norm(v_proj h, or raw k_proj h on K=V
// layers)                                                                          -> [T, kvh, hd]
// q may be longer than T·nH·hd: the previous layer's q storage can be handed back in
// (q_storage), so a step allocates it once, not once per layer.
struct Qkv {
  Vec q, k, v;
};
Qkv project_qkv(const Model& m, int layer, const Vec& x, const std::vector<int64_t>& positions, const RopeTables& rope,
                const Exec& ex, Vec q_storage = {});

// x += post_attention_norm(o_proj(a))                  a: [T, nH, hd]
void attention_output(const Model& m, int layer, const Vec& a, Vec& x, const Exec& ex);

// x += post_feedforward_norm(mlp(pre_ff_norm(x)) [+ MoE branch])
void feed_forward(const Model& m, int layer, Vec& x, const Exec& ex);

// x += post_per_layer_input_norm(proj(gelu(gate(x)) ⊙ ple[:, layer])); then x *= layer_scalar
void per_layer_tail(const Model& m, int layer, Vec& x, const Vec& ple, const Exec& ex);

// logits = softcap(final_norm(x) · headᵀ)                                          -> [T, V]
Vec logits(const Model& m, Vec x, const Exec& ex);
// The same into `out`, resized to [T, V]: a kept vector's storage is reused (no zero-fill).
// With `normed`, also the head's input final_norm(x) into it, [T, H] (a drafter's hidden input).
void logits_into(const Model& m, Vec x, const Exec& ex, Vec& out, Vec* normed = nullptr);

// One step's keys and values per layer that owns a cache ([T, kvh, hd]; empty for KV-shared
// layers, which read their source layer's).
struct StepKv {
  std::vector<Vec> k, v;
};

// A layer's attention: a [T, nH, hd] from q [T, nH, hd] and the step's own k, v [T, kvh, hd] of
// the layer the keys come from, plus whatever keys the caller keeps (a cache, or none).
using Attend = std::function<void(int layer, const Vec& q, const Vec& k, const Vec& v, Vec& a)>;

// The decoder stack over one step: embeddings, per-layer inputs, every layer in order; returns
// the residual stream after the last layer [T, H], leaving each owning layer's k, v in `kv`.
// Rows with a span (spans[t], empty for a text-only step) embed their soft token and read the
// pad row of the per-layer table (model/soft_tokens.h); the mask is the caller's `attend`.
Vec decoder_stack(const Model& m, const std::vector<int>& tokens, const std::vector<int64_t>& positions, const Exec& ex,
                  const Attend& attend, StepKv& kv, const RowSpans& spans = {});

}  // namespace g4::blocks
