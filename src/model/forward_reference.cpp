#include "model/forward_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/reference_ops.h"
#include "platform/error.h"

namespace g4 {

namespace {

using Vec = std::vector<float>;

// y[T, out] = x[T, in] · Wᵀ
Vec linear(const Vec& x, int64_t T, const TensorView& w) {
  Vec y(static_cast<size_t>(T * w.shape[0]));
  ref::matmul(x.data(), T, w, y.data());
  return y;
}

// down(gelu(gate(x)) * up(x)) for a dense MLP given as three [out, in] tensors.
Vec gated_mlp(const Vec& x, int64_t T, const TensorView& gate, const TensorView& up, const TensorView& down) {
  Vec g = linear(x, T, gate), u = linear(x, T, up);
  for (size_t i = 0; i < g.size(); ++i) g[i] = ref::gelu_tanh(g[i]) * u[i];
  return linear(g, T, down);
}

// Causal attention for one layer. q: [T, nH, hd]; k, v: [T, kvh, hd] (already normed/roped).
// Sliding layers see kv positions with q - kv < window (position space).
Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t T, int64_t nH, int64_t kvh, int64_t hd,
              bool sliding, int64_t window) {
  Vec out(size_t(T * nH * hd), 0.0f);
  Vec scores(static_cast<size_t>(T));
  const int64_t group = nH / kvh;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t first = sliding ? std::max<int64_t>(0, t - window + 1) : 0;
    for (int64_t h = 0; h < nH; ++h) {
      const int64_t kh = h / group;  // GQA: query head h reads kv head h / (nH / kvh)
      const float* qv = &q[size_t((t * nH + h) * hd)];
      const int64_t n = t - first + 1;
      for (int64_t s = first; s <= t; ++s)
        scores[size_t(s - first)] = ref::dot(qv, &k[size_t((s * kvh + kh) * hd)], hd);  // scaling = 1.0
      ref::softmax(scores.data(), n);
      float* o = &out[size_t((t * nH + h) * hd)];
      for (int64_t s = first; s <= t; ++s) {
        const float p = scores[size_t(s - first)];
        const float* vv = &v[size_t((s * kvh + kh) * hd)];
        for (int64_t d = 0; d < hd; ++d) o[d] += p * vv[d];
      }
    }
  }
  return out;
}

void add_in_place(Vec& a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

// Mixture of experts (26B-A4B). r: raw residual [T, H]; x: pre_feedforward_layernorm_2(r).
Vec moe_block(const ModelConfig& c, const LayerWeights& lw, const Vec& r, const Vec& x, int64_t T) {
  const int64_t H = c.hidden_size, E = c.num_experts, K = c.top_k_experts, Ie = c.moe_intermediate_size;
  // Router on the raw residual: rmsnorm without weight, * scale * H^-0.5.
  Vec z = r;
  ref::rms_norm(z.data(), T, H, nullptr, float(c.rms_norm_eps));
  const float hs = float(1.0 / std::sqrt(double(H)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) z[size_t(t * H + i)] *= lw.router_scale->at(i) * hs;
  Vec logits = linear(z, T, *lw.router_proj);  // [T, E]
  Vec out(size_t(T * H), 0.0f);
  std::vector<int64_t> order(static_cast<size_t>(E));
  Vec xin(static_cast<size_t>(H)), gu(static_cast<size_t>(2 * Ie)), act(static_cast<size_t>(Ie)), y(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    float* p = &logits[size_t(t * E)];
    ref::softmax(p, E);
    std::iota(order.begin(), order.end(), 0);
    // top-k by probability; ties go to the lower index, as torch.topk does on CPU in practice.
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += p[order[size_t(j)]];
    std::copy(&x[size_t(t * H)], &x[size_t(t * H)] + H, xin.begin());
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = order[size_t(j)];
      // Renormalise over the top k, then the per-expert scale (after renormalisation).
      const float w = p[e] / sum * lw.router_per_expert_scale->at(e);
      const TensorView gate_up = slice_leading(*lw.experts_gate_up, e);  // [2·Ie, H], gate rows first
      const TensorView down = slice_leading(*lw.experts_down, e);        // [H, Ie]
      ref::matmul(xin.data(), 1, gate_up, gu.data());
      for (int64_t i = 0; i < Ie; ++i) act[size_t(i)] = ref::gelu_tanh(gu[size_t(i)]) * gu[size_t(Ie + i)];
      ref::matmul(act.data(), 1, down, y.data());
      for (int64_t i = 0; i < H; ++i) out[size_t(t * H + i)] += w * y[size_t(i)];
    }
  }
  return out;
}

}  // namespace

float embedding_scale(int64_t width, DType weight_dtype) {
  const float s = std::sqrt(float(width));
  switch (weight_dtype) {
    case DType::BF16: return round_to_bf16(s);
    case DType::F16: return round_to_f16(s);
    default: return s;
  }
}

std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int64_t T = int64_t(tokens.size());
  if (T == 0) throw Error("forward: empty token sequence");
  for (int64_t t = 0; t < T; ++t)
    if (tokens[size_t(t)] < 0 || tokens[size_t(t)] >= c.vocab_size)
      throw Error("forward: token " + std::to_string(tokens[size_t(t)]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const int64_t H = c.hidden_size, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input, nH = c.num_attention_heads;
  const float eps = float(c.rms_norm_eps);

  // x = embed_tokens[ids] * sqrt(H)   [T, H]
  Vec x(static_cast<size_t>(T * H));
  const float escale = embedding_scale(H, w.dtype);
  for (int64_t t = 0; t < T; ++t) {
    w.embed_tokens->row_to_f32(tokens[size_t(t)], &x[size_t(t * H)]);
    for (int64_t i = 0; i < H; ++i) x[size_t(t * H + i)] *= escale;
  }

  // Per-layer embeddings: ple [T, L, P]
  Vec ple;
  if (P > 0) {
    Vec ctx = linear(x, T, *w.per_layer_model_projection);  // [T, L·P], from the scaled embeddings
    const float hs = float(1.0 / std::sqrt(double(H)));
    for (float& v : ctx) v *= hs;
    ref::rms_norm(ctx.data(), T * L, P, w.per_layer_projection_norm, eps);  // per [P] slice
    ple.resize(static_cast<size_t>(T * L * P));
    const float pscale = embedding_scale(P, w.embed_per_layer->dtype);
    const float inv_sqrt2 = float(1.0 / std::sqrt(2.0));
    Vec row(static_cast<size_t>(L * P));
    for (int64_t t = 0; t < T; ++t) {
      const int id = tokens[size_t(t)];
      if (id >= c.vocab_size_per_layer_input)
        throw Error("forward: token " + std::to_string(id) + " has no per-layer embedding (vocab_size_per_layer_input = " +
                    std::to_string(c.vocab_size_per_layer_input) + ")");
      w.embed_per_layer->row_to_f32(id, row.data());
      for (int64_t i = 0; i < L * P; ++i)
        ple[size_t(t * L * P + i)] = (ctx[size_t(t * L * P + i)] + row[size_t(i)] * pscale) * inv_sqrt2;
    }
  }

  const std::vector<float> inv_freq_sliding = c.rope_sliding.type == RopeType::Proportional
      ? ref::rope_inv_freq_proportional(c.head_dim, c.rope_sliding.theta, c.rope_sliding.partial_rotary_factor)
      : ref::rope_inv_freq_default(c.head_dim, c.rope_sliding.theta);
  const std::vector<float> inv_freq_full = c.rope_full.type == RopeType::Proportional
      ? ref::rope_inv_freq_proportional(c.global_head_dim, c.rope_full.theta, c.rope_full.partial_rotary_factor)
      : ref::rope_inv_freq_default(c.global_head_dim, c.rope_full.theta);

  // Each non-shared layer's K and V [T, kvh, hd]; shared layers read their source's.
  std::vector<Vec> layer_k(static_cast<size_t>(L)), layer_v(static_cast<size_t>(L));

  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    const int64_t hd = p.head_dim, kvh = p.kv_heads;
    const bool sliding = p.type == LayerType::Sliding;
    const auto& inv_freq = sliding ? inv_freq_sliding : inv_freq_full;

    // ---- attention (sandwich norm) ----
    Vec h = x;
    ref::rms_norm(h.data(), T, H, lw.input_norm, eps);
    Vec q = linear(h, T, *lw.q_proj);  // [T, nH, hd]
    ref::rms_norm(q.data(), T * nH, hd, lw.q_norm, eps);
    for (int64_t t = 0; t < T; ++t) ref::rope(&q[size_t(t * nH * hd)], nH, hd, inv_freq, t);
    if (!p.kv_shared) {
      Vec k_raw = linear(h, T, *lw.k_proj);                      // [T, kvh, hd]
      Vec v = lw.v_proj ? linear(h, T, *lw.v_proj) : k_raw;       // K=V: V from the raw key projection
      Vec k = k_raw;
      ref::rms_norm(k.data(), T * kvh, hd, lw.k_norm, eps);
      for (int64_t t = 0; t < T; ++t) ref::rope(&k[size_t(t * kvh * hd)], kvh, hd, inv_freq, t);
      ref::rms_norm(v.data(), T * kvh, hd, nullptr, eps);        // v_norm: no weight, no RoPE
      layer_k[size_t(i)] = std::move(k);
      layer_v[size_t(i)] = std::move(v);
    }
    const Vec& K = layer_k[size_t(p.kv_source_layer)];
    const Vec& V = layer_v[size_t(p.kv_source_layer)];
    Vec a = attention(q, K, V, T, nH, kvh, hd, sliding, c.sliding_window);
    Vec o = linear(a, T, *lw.o_proj);  // [T, H]
    ref::rms_norm(o.data(), T, H, lw.post_attention_norm, eps);
    add_in_place(x, o);

    // ---- feed-forward (sandwich norm) ----
    const Vec r = x;
    Vec mlp_in = x;
    ref::rms_norm(mlp_in.data(), T, H, lw.pre_feedforward_norm, eps);
    Vec mo = gated_mlp(mlp_in, T, *lw.gate_proj, *lw.up_proj, *lw.down_proj);
    if (p.moe) {
      ref::rms_norm(mo.data(), T, H, lw.post_feedforward_norm_1, eps);
      Vec ex = r;
      ref::rms_norm(ex.data(), T, H, lw.pre_feedforward_norm_2, eps);
      Vec e = moe_block(c, lw, r, ex, T);
      ref::rms_norm(e.data(), T, H, lw.post_feedforward_norm_2, eps);
      add_in_place(mo, e);
    }
    ref::rms_norm(mo.data(), T, H, lw.post_feedforward_norm, eps);
    add_in_place(x, mo);

    // ---- per-layer embedding injection ----
    if (P > 0) {
      Vec g = linear(x, T, *lw.ple_input_gate);  // [T, P]
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < P; ++j) {
          float& gv = g[size_t(t * P + j)];
          gv = ref::gelu_tanh(gv) * ple[size_t((t * L + i) * P + j)];
        }
      Vec y = linear(g, T, *lw.ple_projection);  // [T, H]
      ref::rms_norm(y.data(), T, H, lw.ple_post_norm, eps);
      add_in_place(x, y);
    }

    const float scalar = lw.layer_scalar->at(0);  // whole stream, every layer
    for (float& v : x) v *= scalar;
  }

  ref::rms_norm(x.data(), T, H, w.final_norm, eps);
  Vec logits = linear(x, T, *w.lm_head);  // tied head, no sqrt(H)
  if (c.final_logit_softcapping) {
    const float cap = float(*c.final_logit_softcapping);
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  return logits;
}

}  // namespace g4
