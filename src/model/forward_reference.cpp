#include "model/forward_reference.h"

#include <algorithm>
#include <cmath>

#include "model/decoder_blocks.h"
#include "ops/ref/reference_ops.h"
#include "platform/error.h"

namespace g4 {

float embedding_scale(int64_t width, DType weight_dtype) {
  const float s = std::sqrt(float(width));
  switch (weight_dtype) {
    case DType::BF16: return round_to_bf16(s);
    case DType::F16: return round_to_f16(s);
    default: return s;
  }
}

std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens) {
  using blocks::Vec;
  const ModelConfig& c = m.config;
  const int64_t T = int64_t(tokens.size());
  if (T == 0) throw Error("forward: empty token sequence");
  blocks::check_tokens(c, tokens);
  const int64_t L = c.num_hidden_layers, nH = c.num_attention_heads;
  const blocks::RopeTables rope(c);
  const blocks::Exec ex;  // reference loops, always
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[size_t(t)] = t;  // one sequence from position 0

  Vec x = blocks::embed(m, tokens);                                            // [T, H]
  const Vec ple = c.has_ple() ? blocks::per_layer_inputs(m, tokens, x, ex) : Vec{};  // [T, L, P]

  // Every non-shared layer's K and V over the whole sequence [T, kvh, hd]; shared layers read
  // their source layer's.
  std::vector<Vec> layer_k(static_cast<size_t>(L)), layer_v(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    const int64_t hd = p.head_dim, kvh = p.kv_heads;
    blocks::Qkv qkv = blocks::project_qkv(m, int(i), x, positions, rope, ex);
    if (!p.kv_shared) {
      layer_k[size_t(i)] = std::move(qkv.k);
      layer_v[size_t(i)] = std::move(qkv.v);
    }
    const Vec& K = layer_k[size_t(p.kv_source_layer)];
    const Vec& V = layer_v[size_t(p.kv_source_layer)];
    // Causal; sliding layers see keys with q - k < window, in position space.
    Vec a(static_cast<size_t>(T * nH * hd));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t first = p.type == LayerType::Sliding ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
      ref::attend_row(&qkv.q[size_t(t * nH * hd)], &K[size_t(first * kvh * hd)], &V[size_t(first * kvh * hd)],
                         t - first + 1, nH, kvh, hd, &a[size_t(t * nH * hd)]);
    }
    blocks::attention_output(m, int(i), a, x, ex);
    blocks::feed_forward(m, int(i), x, ex);
    blocks::per_layer_tail(m, int(i), x, ple, ex);
  }
  return blocks::logits(m, std::move(x), ex);
}

}  // namespace g4
