// The pieces of the Gemma 4 decoder layer that do not depend on how attention finds its keys:
// embeddings, Q/K/V projections with norms and RoPE, the attention output, the feed-forward
// block (dense + MoE), the per-layer-embedding injection and the head. Both the whole-sequence
// reference (forward_reference) and the cached, batched path (forward_cached) are built from
// these; they differ only in where K/V come from. Rows are tokens; each row has its own position.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "ops/matmul/matmul.h"
#include "platform/scope_timer.h"

namespace g4::blocks {

using Vec = std::vector<float>;

// Wall time a forward pass spent in its weight products and in its attention, added up on the
// calling thread (each timed from hand-off to result, the pool's waits included). For g4 bench's
// breakdown of a decoded token; the rest of a step (norms, RoPE, activations, the cache writes)
// is its total less these two.
struct StepTimes {
  double weight_products_s = 0, attention_s = 0;
};

// How weight products run: the reference loops (matmul == nullptr), or the SIMD kernels on a
// thread pool. Everything else is the same code either way.
struct Exec {
  const ops::MatmulContext* matmul = nullptr;
  StepTimes* times = nullptr;  // when set, every weight product and attention adds its wall time
  // The SIMD attention of the cached pass (forward_cached, when matmul is set): a layer's
  // attention runs on matmul->pool only with at least this many multiply-adds (below that,
  // waking the threads costs more than it saves); each row's keys are cut into slices of
  // attention_slice keys (work items for the pool, softmax states merged in order). The slice
  // length is part of the arithmetic (f32 rounding), never chosen from the batch or the pool.
  // Tests lower both to exercise those paths on tiny models.
  int64_t attention_parallel_min_fmas = int64_t(1) << 17;
  int64_t attention_slice = 256;
  // Row-wise steps (norms, RoPE, gated activations) split over matmul->pool by rows from this
  // many values: a prefill step's ran on the calling thread while the pool waited (~25% of a
  // q4 512-token prefill); a decode token's are too small to pay for a hand-off. Each row is
  // computed alone, so the split changes no bit. Tests lower it to split tiny models' rows.
  int64_t row_parallel_min_values = 32768;
};

// RoPE inverse-frequency tables for both layer types, computed once per model; given the
// step's positions, also each row's cos/sin per layer type ([T, hd/2] each), computed once per
// step instead of once per layer for q and again for k (ref::rope_cos_sin: the same bits).
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

// Checks ids against the vocabulary (and the PLE table); throws g4::Error naming the bad one.
void check_tokens(const ModelConfig& c, const std::vector<int>& tokens);

// x = embed_tokens[ids] · sqrt(H) (scale rounded to the weight dtype)            -> [T, H]
Vec embed(const Model& m, const std::vector<int>& tokens);

// Per-layer inputs (P > 0): ((proj(x)·H^-½ → RMSNorm per P slice) + table[ids]·√P) · 2^-½ -> [T, L, P]
Vec per_layer_inputs(const Model& m, const std::vector<int>& tokens, const Vec& x, const Exec& ex);

// h = input_layernorm(x); q = rope(q_norm(q_proj h))                               -> [T, nH, hd]
// For non-shared layers also k = rope(k_norm(k_proj h)), v = v_norm(v_proj h or raw k) -> [T, kvh, hd]
// q: [T, nH, hd] at the front of a vector that may be longer: the step's previous layer's q
// storage can be handed back in (q_storage), so a prefill step zero-fills a fresh one once,
// not once per layer. k, v: [T, kvh, hd], empty for a KV-shared layer.
struct Qkv {
  Vec q, k, v;
};
Qkv project_qkv(const Model& m, int layer, const Vec& x, const std::vector<int64_t>& positions, const RopeTables& rope,
                const Exec& ex, Vec q_storage = {});

// x += post_attention_norm(o_proj(a))
void attention_output(const Model& m, int layer, const Vec& a, Vec& x, const Exec& ex);

// x += post_feedforward_norm(mlp(pre_ff_norm(x)) [+ MoE branch])
void feed_forward(const Model& m, int layer, Vec& x, const Exec& ex);

// x += post_per_layer_input_norm(proj(gelu(gate(x)) ⊙ ple[:, layer])); then x *= layer_scalar
void per_layer_tail(const Model& m, int layer, Vec& x, const Vec& ple, const Exec& ex);

// logits = softcap(final_norm(x) · headᵀ)                                          -> [T, V]
Vec logits(const Model& m, Vec x, const Exec& ex);
// The same into `out`, resized to [T, V]: a kept vector's storage is reused (no zero-fill).
void logits_into(const Model& m, Vec x, const Exec& ex, Vec& out);

// y[T, out] = x[T, in] · Wᵀ
Vec linear(const Vec& x, int64_t T, const TensorView& w, const Exec& ex);

}  // namespace g4::blocks
