#include "model/gemma4.h"

#include <algorithm>
#include <cmath>

#include "model/gemma4_moe.h"
#include "ops/ref/reference_ops.h"
#include "platform/error.h"

namespace g4::blocks {

namespace {

std::vector<float> inv_freq(const RopeParams& p, int64_t hd) {
  return p.type == RopeType::Proportional ? ref::rope_inv_freq_proportional(hd, p.theta, p.partial_rotary_factor)
                                          : ref::rope_inv_freq_default(hd, p.theta);
}

RopeTables::Angles angles_at(const std::vector<float>& inv_freq, const std::vector<int64_t>& positions) {
  RopeTables::Angles a;
  const size_t half = inv_freq.size();
  a.cos.resize(positions.size() * half);
  a.sin.resize(a.cos.size());
  for (size_t t = 0; t < positions.size(); ++t) ref::rope_cos_sin(inv_freq, positions[t], &a.cos[t * half], &a.sin[t * half]);
  return a;
}

// RoPE on x [T, heads, hd], row t at positions[t]: from the step's cos/sin tables when they were
// built, else ref::rope per row. Same bits either way.
void rope_rows(const Exec& ex, float* x, int64_t T, int64_t heads, int64_t hd, const std::vector<float>& inv_freq,
               const RopeTables::Angles& angles, const std::vector<int64_t>& positions) {
  const int64_t half = hd / 2;
  const bool tabled = angles.cos.size() == size_t(T * half);
  ex.for_rows(T, heads * hd, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (tabled)
        ref::rope_rotate(x + t * heads * hd, heads, hd, &angles.cos[size_t(t * half)], &angles.sin[size_t(t * half)]);
      else
        ref::rope(x + t * heads * hd, heads, hd, inv_freq, positions[size_t(t)]);
    }
  });
}

// The products project_qkv runs for `layer`, in order: q, then unless KV-shared k and v.
std::vector<const TensorView*> qkv_weights(const Model& m, int layer) {
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  std::vector<const TensorView*> ws{lw.q_proj};
  if (!m.config.layers[size_t(layer)].kv_shared) {
    ws.push_back(lw.k_proj);
    if (lw.v_proj) ws.push_back(lw.v_proj);
  }
  return ws;
}

// The products that follow a layer's last one: the next layer's q/k/v, or the head.
std::vector<const TensorView*> after_layer(const Model& m, int layer) {
  if (layer + 1 < m.config.num_hidden_layers) return qkv_weights(m, layer + 1);
  return {m.weights.lm_head};
}

// y = down(gelu(gate x) ⊙ up x)                         x: [T, H], y: [T, H]; gate, up: [I, H]
void gated_mlp(const Vec& x, int64_t T, const LayerWeights& lw, float* y, const Exec& ex) {
  const int64_t I = lw.gate_proj->shape[0];
  Scratch gu(Buffer::GateUp, size_t(2 * T * I));  // [2, T, I]: gate, then up
  float* const g = gu.data();
  float* const u = g + T * I;
  ex.products(x.data(), T, {{lw.gate_proj, g}, {lw.up_proj, u}});
  ex.prefetch(T, {lw.down_proj});
  ex.for_rows(T, I, [&](int64_t b, int64_t e) { ex.gelu_tanh_mul(g + b * I, u + b * I, size_t((e - b) * I)); });
  ex.product(g, T, *lw.down_proj, y);
}

// x += post_feedforward_norm_2(moe(pre_feedforward_norm_2(x), router on x)), into the dense
// branch's output mo (already post_feedforward_norm_1'd).
void add_moe_branch(const Model& m, int layer, const Vec& x, float* mo, const Exec& ex) {
  const ModelConfig& c = m.config;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H;
  const float eps = float(c.rms_norm_eps);
  Vec experts_in = x;  // the experts read pre_feedforward_layernorm_2(residual); the router the raw residual
  ex.rms_norm(experts_in.data(), T, H, lw.pre_feedforward_norm_2, eps);
  Vec e = moe_block(c, lw, x, experts_in, T, ex);
  ex.rms_norm(e.data(), T, H, lw.post_feedforward_norm_2, eps);
  ex.add(mo, e.data(), T, H);
}

}  // namespace

RopeTables::RopeTables(const ModelConfig& c)
    : sliding(inv_freq(c.rope_sliding, c.head_dim)), full(inv_freq(c.rope_full, c.global_head_dim)) {}

RopeTables::RopeTables(const ModelConfig& c, const std::vector<int64_t>& positions) : RopeTables(c) {
  sliding_at = angles_at(sliding, positions);
  full_at = angles_at(full, positions);
}

float embedding_scale(int64_t width, DType weight_dtype) {
  const float s = std::sqrt(float(width));
  switch (weight_dtype) {
    case DType::BF16: return round_to_bf16(s);
    case DType::F16: return round_to_f16(s);
    default: return s;
  }
}

void check_tokens(const ModelConfig& c, const std::vector<int>& tokens) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int id = tokens[t];
    if (id < 0 || id >= c.vocab_size)
      throw Error("forward: token " + std::to_string(id) + " at position " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    if (c.has_ple() && id >= c.vocab_size_per_layer_input)
      throw Error("forward: token " + std::to_string(id) + " has no per-layer embedding (vocab_size_per_layer_input = " +
                  std::to_string(c.vocab_size_per_layer_input) + ")");
  }
}

Vec embed(const Model& m, const std::vector<int>& tokens) { return embed(m, tokens, {}, {}); }

Vec embed(const Model& m, const std::vector<int>& tokens, const std::vector<int64_t>& positions, const RowSpans& spans) {
  const int64_t H = m.config.hidden_size, T = int64_t(tokens.size());
  Vec x(static_cast<size_t>(T * H));
  const float scale = embedding_scale(H, m.weights.dtype);
  m.weights.embed_tokens->will_read_rows(tokens);  // one wait for the disk, not T (tensor_view.h)
  for (int64_t t = 0; t < T; ++t) {
    float* row = &x[size_t(t * H)];
    if (!spans.empty() && spans[size_t(t)]) {  // a soft token: as is, no sqrt(H)
      const float* soft = spans[size_t(t)]->row_at(positions[size_t(t)], H);
      std::copy(soft, soft + H, row);
      continue;
    }
    m.weights.embed_tokens->row_to_f32(tokens[size_t(t)], row);
    for (int64_t i = 0; i < H; ++i) row[i] *= scale;
  }
  return x;
}

Vec per_layer_inputs(const Model& m, const std::vector<int>& tokens, const Vec& x, const Exec& ex) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int64_t H = c.hidden_size, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input, T = int64_t(tokens.size());
  w.embed_per_layer->will_read_rows(tokens);  // the table's rows come from disk while the projection runs
  Vec ctx = ex.linear(x, T, *w.per_layer_model_projection);  // [T, L·P] from the scaled embeddings
  ex.scale(ctx, float(1.0 / std::sqrt(double(H))), L * P);
  ex.rms_norm(ctx.data(), T * L, P, w.per_layer_projection_norm, float(c.rms_norm_eps));  // per [P] slice
  const float pscale = embedding_scale(P, w.embed_per_layer->dtype);
  const float inv_sqrt2 = float(1.0 / std::sqrt(2.0));
  Vec row(static_cast<size_t>(L * P));
  for (int64_t t = 0; t < T; ++t) {
    w.embed_per_layer->row_to_f32(tokens[size_t(t)], row.data());  // a gather: one row per token
    for (int64_t i = 0; i < L * P; ++i) {
      float& v = ctx[size_t(t * L * P + i)];
      v = (v + row[size_t(i)] * pscale) * inv_sqrt2;
    }
  }
  return ctx;
}

Qkv project_qkv(const Model& m, int layer, const Vec& x, const std::vector<int64_t>& positions, const RopeTables& rope,
                const Exec& ex, Vec q_storage) {
  const ModelConfig& c = m.config;
  const LayerPlan& p = c.layers[size_t(layer)];
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const int64_t H = c.hidden_size, T = int64_t(positions.size()), nH = c.num_attention_heads;
  const int64_t hd = p.head_dim, kvh = p.kv_heads;
  const float eps = float(c.rms_norm_eps);
  Scratch h(Buffer::Normed, size_t(T * H));  // [T, H]
  std::copy(x.begin(), x.end(), h.data());
  ex.rms_norm(h.data(), T, H, lw.input_norm, eps);
  Qkv out;
  out.q = std::move(q_storage);
  if (out.q.size() < size_t(T * nH * hd)) out.q.resize(size_t(T * nH * hd));
  if (!p.kv_shared) {
    out.k.resize(size_t(T * kvh * hd));
    out.v.resize(out.k.size());
  }
  std::vector<ops::Product> products;  // q, k, v in one hand-off (v from k's product on K=V layers)
  for (const TensorView* w : qkv_weights(m, layer))
    products.push_back({w, w == lw.q_proj ? out.q.data() : w == lw.k_proj ? out.k.data() : out.v.data()});
  ex.products(h.data(), T, products);
  ex.prefetch(T, {lw.o_proj});
  ex.rms_norm(out.q.data(), T * nH, hd, lw.q_norm, eps);
  rope_rows(ex, out.q.data(), T, nH, hd, rope.for_layer(p), rope.angles_for_layer(p), positions);
  if (p.kv_shared) return out;
  if (!lw.v_proj) out.v = out.k;  // K=V: the raw key projection, before k_norm and RoPE
  ex.rms_norm(out.k.data(), T * kvh, hd, lw.k_norm, eps);
  rope_rows(ex, out.k.data(), T, kvh, hd, rope.for_layer(p), rope.angles_for_layer(p), positions);
  ex.rms_norm(out.v.data(), T * kvh, hd, nullptr, eps);  // v_norm: no weight, no RoPE
  return out;
}

void attention_output(const Model& m, int layer, const Vec& a, Vec& x, const Exec& ex) {
  const int64_t H = m.config.hidden_size, T = int64_t(x.size()) / H;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  Scratch o(Buffer::AttentionOut, size_t(T * H));  // [T, H]
  ex.product(a.data(), T, *lw.o_proj, o.data());
  ex.prefetch(T, {lw.gate_proj, lw.up_proj});
  ex.rms_norm(o.data(), T, H, lw.post_attention_norm, float(m.config.rms_norm_eps));
  ex.add(x.data(), o.data(), T, H);
}

void feed_forward(const Model& m, int layer, Vec& x, const Exec& ex) {
  const ModelConfig& c = m.config;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const bool moe = c.layers[size_t(layer)].moe;
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H;
  const float eps = float(c.rms_norm_eps);
  Vec in = x;
  ex.rms_norm(in.data(), T, H, lw.pre_feedforward_norm, eps);
  Scratch mo(Buffer::FeedForwardOut, size_t(T * H));  // [T, H]
  gated_mlp(in, T, lw, mo.data(), ex);
  const auto next = c.has_ple() ? std::vector<const TensorView*>{lw.ple_input_gate} : after_layer(m, layer);
  if (moe) {  // the dense branch is post_feedforward_norm_1'd, the experts' added to it
    ex.rms_norm(mo.data(), T, H, lw.post_feedforward_norm_1, eps);
    add_moe_branch(m, layer, x, mo.data(), ex);
  }
  ex.prefetch(T, next);
  ex.rms_norm(mo.data(), T, H, lw.post_feedforward_norm, eps);
  ex.add(x.data(), mo.data(), T, H);
}

void per_layer_tail(const Model& m, int layer, Vec& x, const Vec& ple, const Exec& ex) {
  const ModelConfig& c = m.config;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input;
  if (P > 0) {
    Scratch g(Buffer::PleGate, size_t(T * P));  // [T, P] = gelu(gate x) ⊙ ple[:, layer]
    ex.product(x.data(), T, *lw.ple_input_gate, g.data());
    ex.prefetch(T, {lw.ple_projection});
    ex.for_rows(T, P, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) ex.gelu_tanh_mul(g.data() + t * P, &ple[size_t((t * L + layer) * P)], size_t(P));
    });
    Scratch y(Buffer::PleOut, size_t(T * H));  // [T, H]
    ex.product(g.data(), T, *lw.ple_projection, y.data());
    ex.prefetch(T, after_layer(m, layer));
    ex.rms_norm(y.data(), T, H, lw.ple_post_norm, float(c.rms_norm_eps));
    ex.add(x.data(), y.data(), T, H);
  }
  ex.scale(x, lw.layer_scalar->at(0), H);  // the whole stream, every layer
}

Vec logits(const Model& m, Vec x, const Exec& ex) {
  Vec out;
  logits_into(m, std::move(x), ex, out);
  return out;
}

void logits_into(const Model& m, Vec x, const Exec& ex, Vec& out, Vec* normed) {
  const ModelConfig& c = m.config;
  const TensorView& head = *m.weights.lm_head;
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H;
  ex.rms_norm(x.data(), T, H, m.weights.final_norm, float(c.rms_norm_eps));
  if (normed) *normed = x;
  out.resize(size_t(T * head.shape[0]));  // every value is written by the product below
  ex.product(x.data(), T, head, out.data());  // tied head, no sqrt(H)
  if (c.final_logit_softcapping) ex.softcap(out, float(*c.final_logit_softcapping));
}

Vec decoder_stack(const Model& m, const std::vector<int>& tokens, const std::vector<int64_t>& positions, const Exec& ex,
                  const Attend& attend, StepKv& kv, const RowSpans& spans) {
  const ModelConfig& c = m.config;
  const int64_t T = int64_t(tokens.size()), L = c.num_hidden_layers;
  // The SIMD path takes each row's RoPE cos/sin from tables built once for the step; the
  // reference computes them per layer, as the spec does.
  const RopeTables rope = ex.simd() ? RopeTables(c, positions) : RopeTables(c);
  Vec x = embed(m, tokens, positions, spans);  // [T, H]
  // [T, L, P]: the projection reads x (soft tokens included), the table the pad row at them
  const std::vector<int> soft_ids = c.has_ple() ? per_layer_ids(c, tokens, spans) : std::vector<int>{};
  const Vec ple = c.has_ple() ? per_layer_inputs(m, soft_ids.empty() ? tokens : soft_ids, x, ex) : Vec{};
  kv.k.assign(size_t(L), {});
  kv.v.assign(size_t(L), {});
  int64_t widest = 0;
  for (const LayerPlan& p : c.layers) widest = std::max<int64_t>(widest, p.head_dim);
  Vec a(static_cast<size_t>(T * c.num_attention_heads * widest));  // [T, nH, hd]: each layer writes all it reads
  Vec q_storage;
  for (int i = 0; i < int(L); ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    Qkv qkv = project_qkv(m, i, x, positions, rope, ex, std::move(q_storage));
    if (!p.kv_shared) {
      kv.k[size_t(i)] = std::move(qkv.k);
      kv.v[size_t(i)] = std::move(qkv.v);
    }
    attend(i, qkv.q, kv.k[size_t(p.kv_source_layer)], kv.v[size_t(p.kv_source_layer)], a);
    q_storage = std::move(qkv.q);  // the next layer's q reuses it
    attention_output(m, i, a, x, ex);
    feed_forward(m, i, x, ex);
    per_layer_tail(m, i, x, ple, ex);
  }
  return x;
}

}  // namespace g4::blocks
