// The mixture-of-experts branch of a Gemma 4 feed-forward block (26B-A4B), beside the dense MLP.
#pragma once
#include <cstdint>

#include "model/executor.h"
#include "model/model.h"

namespace g4::blocks {

// r: the raw residual [T, H] (the router reads it); x: pre_feedforward_layernorm_2(r) [T, H]
// (the experts read it). Router: softmax over all experts of router_proj(rmsnorm(r) · scale ·
// H^-½), top-k, renormalised over the k, times each expert's scale. Expert e: down(gelu(gate x)
// ⊙ up x). Returns Σ_k weight_k · expert_k(x)                                          -> [T, H]
Vec moe_block(const ModelConfig& c, const LayerWeights& lw, const Vec& r, const Vec& x, int64_t T, const Exec& ex);

}  // namespace g4::blocks
