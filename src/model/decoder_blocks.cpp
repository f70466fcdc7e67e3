#include "model/decoder_blocks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "model/forward_reference.h"
#include "ops/rows/activation_kernels.h"
#include "ops/ref/reference_ops.h"
#include "ops/rows/row_reductions.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

namespace g4::blocks {

namespace {

std::vector<float> inv_freq(const RopeParams& p, int64_t hd) {
  return p.type == RopeType::Proportional ? ref::rope_inv_freq_proportional(hd, p.theta, p.partial_rotary_factor)
                                          : ref::rope_inv_freq_default(hd, p.theta);
}

void matmul_into(const float* x, int64_t T, const TensorView& w, float* y, const Exec& ex) {
  ScopeTimer timer(ex.times ? &ex.times->weight_products_s : nullptr);
  if (ex.matmul) ops::matmul(x, T, w, y, *ex.matmul);
  else ref::matmul(x, T, w, y);
}

// fn(begin, end) over rows [0, rows) of `width` values each, split over the pool on the fast path
// when there are enough of them (Exec::row_parallel_min_values).
void for_row_ranges(const Exec& ex, int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool* pool = ex.matmul ? ex.matmul->pool : nullptr;
  if (!pool || pool->size() == 1 || rows < 2 || rows * width < ex.row_parallel_min_values) {
    fn(0, rows);
    return;
  }
  pool->parallel_for(rows, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

// a += b and a *= s over rows of `width` values, split over the pool like the row-wise steps
// (each element alone, so no split changes a bit): a prefill step's residual stream is T x H
// values, and these passes ran on the calling thread while the pool waited.
void add_in_place(const Exec& ex, float* a, const float* b, int64_t rows, int64_t width) {
  for_row_ranges(ex, rows, width, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0 * width); i < size_t(r1 * width); ++i) a[i] += b[i];
  });
}

void scale_in_place(const Exec& ex, Vec& a, float s, int64_t width) {
  for_row_ranges(ex, int64_t(a.size()) / width, width, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0 * width); i < size_t(r1 * width); ++i) a[i] *= s;
  });
}

// RMSNorm over rows: the SIMD version on the fast path, the reference loop otherwise.
void rms_norm(const Exec& ex, float* x, int64_t rows, int64_t n, const TensorView* w, float eps) {
  if (ex.matmul)
    for_row_ranges(ex, rows, n, [&](int64_t b, int64_t e) { ops::rms_norm(x + b * n, e - b, n, w, eps); });
  else
    ref::rms_norm(x, rows, n, w, eps);
}

// RoPE on rows [T, heads, hd], token t at positions[t]: from the step's cos/sin tables when
// they were built (RopeTables with positions), else ref::rope per row. Same bits either way.
void rope_rows(const Exec& ex, float* x, int64_t T, int64_t heads, int64_t hd, const std::vector<float>& inv_freq,
               const RopeTables::Angles& angles, const std::vector<int64_t>& positions) {
  const int64_t half = hd / 2;
  const bool tabled = angles.cos.size() == size_t(T * half);
  for_row_ranges(ex, T, heads * hd, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (tabled)
        ref::rope_rotate(x + t * heads * hd, heads, hd, &angles.cos[size_t(t * half)], &angles.sin[size_t(t * half)]);
      else
        ref::rope(x + t * heads * hd, heads, hd, inv_freq, positions[size_t(t)]);
    }
  });
}

RopeTables::Angles angles_at(const std::vector<float>& inv_freq, const std::vector<int64_t>& positions) {
  RopeTables::Angles a;
  const size_t half = inv_freq.size();
  a.cos.resize(positions.size() * half);
  a.sin.resize(a.cos.size());
  for (size_t t = 0; t < positions.size(); ++t) ref::rope_cos_sin(inv_freq, positions[t], &a.cos[t * half], &a.sin[t * half]);
  return a;
}

// x · wᵢᵀ into each product's output for matrices of the same input: one hand-off to the pool
// for all of them on the fast kernels (ops::matmul_shared_input), bit-identical to separate
// products.
void products_into(const float* x, int64_t T, const std::vector<ops::Product>& products, const Exec& ex) {
  ScopeTimer timer(ex.times ? &ex.times->weight_products_s : nullptr);
  if (ex.matmul) ops::matmul_shared_input(x, T, products, *ex.matmul);
  else
    for (const ops::Product& p : products) ref::matmul(x, T, *p.w, p.y);
}

// Decode: right after a product, the pool's workers start reading the next product's weights
// (ops::warm_products) while this thread does the serial steps in between; prefill is
// compute-bound and skips it. Reads only: no result changes.
void warm_next(const Exec& ex, int64_t T, const std::vector<const TensorView*>& next) {
  if (ex.matmul && T == 1) ops::warm_products(next, *ex.matmul);
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

// What a layer's last product is followed by: the next layer's q/k/v, or after the last layer the head.
std::vector<const TensorView*> after_layer(const Model& m, int layer) {
  if (layer + 1 < m.config.num_hidden_layers) return qkv_weights(m, layer + 1);
  return {m.weights.lm_head};
}

// Working buffers that a product overwrites whole, kept per thread (each call site its own
// `kept`) across layers and steps: fresh zero-filled ones per layer (a 512-token E2B step's
// outputs are 3-8 MB each, its gate/up pair 50 MB) cost a q4 prefill a few % in memset. Up to
// kKeptFloats (64 MiB) the storage is kept; a larger step's buffer is its own. Contents on entry
// are whatever the last use left.
class Scratch {
 public:
  Scratch(Vec& kept, size_t n) : buf_(n <= kKeptFloats ? kept : fresh_) {
    if (buf_.size() < n) buf_.resize(n);
  }
  float* data() { return buf_.data(); }

 private:
  static constexpr size_t kKeptFloats = size_t(1) << 24;
  Vec fresh_;
  Vec& buf_;
};

// down(gelu(gate(x)) * up(x)) -> y [T, H]; the gate and up outputs ([T, I] each) in a Scratch.
void gated_mlp(const Vec& x, int64_t T, const TensorView& gate, const TensorView& up, const TensorView& down, float* y,
               const Exec& ex) {
  const int64_t I = gate.shape[0];
  thread_local Vec kept;
  Scratch gu(kept, size_t(2 * T * I));  // [2, T, I]: gate, then up
  float* const g = gu.data();
  float* const u = g + T * I;
  products_into(x.data(), T, {{&gate, g}, {&up, u}}, ex);
  warm_next(ex, T, {&down});
  if (ex.matmul)  // SIMD path
    for_row_ranges(ex, T, I, [&](int64_t b, int64_t e) { ops::gelu_tanh_mul(g + b * I, u + b * I, size_t((e - b) * I)); });
  else
    for (int64_t i = 0; i < T * I; ++i) g[i] = ref::gelu_tanh(g[i]) * u[i];
  matmul_into(g, T, down, y, ex);
}

// Mixture of experts (26B-A4B). r: raw residual [T, H]; x: pre_feedforward_layernorm_2(r).
// Each expert runs once per step on all the tokens that chose it (its weights read once, not
// once per token), then every token sums its experts' outputs in its own selection order, so
// the result is the same, to the bit, as running the tokens one at a time.
Vec moe_block(const ModelConfig& c, const LayerWeights& lw, const Vec& r, const Vec& x, int64_t T, const Exec& ex) {
  const int64_t H = c.hidden_size, E = c.num_experts, K = c.top_k_experts, Ie = c.moe_intermediate_size;
  // Router on the raw residual: rmsnorm without weight, * scale * H^-0.5.
  Vec z = r;
  rms_norm(ex, z.data(), T, H, nullptr, float(c.rms_norm_eps));
  const float hs = float(1.0 / std::sqrt(double(H)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) z[size_t(t * H + i)] *= lw.router_scale->at(i) * hs;
  Vec probs = linear(z, T, *lw.router_proj, ex);  // [T, E]
  // Routing: slot t·K + j holds the weight of token t's j-th expert.
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::vector<float> weight(static_cast<size_t>(T * K));
  std::vector<std::vector<int64_t>> slots_of(static_cast<size_t>(E));  // per expert, its slots in token order
  for (int64_t t = 0; t < T; ++t) {
    float* p = &probs[size_t(t * E)];
    ref::softmax(p, E);  // over all experts, before top-k
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += p[order[size_t(j)]];
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = order[size_t(j)];
      // Renormalise over the top k, then the per-expert scale (so weights no longer sum to 1).
      weight[size_t(t * K + j)] = p[e] / sum * lw.router_per_expert_scale->at(e);
      slots_of[size_t(e)].push_back(t * K + j);
    }
  }
  Vec y_slots(static_cast<size_t>(T * K * H));  // [T·K, H]: expert output per slot
  Vec xs, gu, act, ys;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int64_t>& slots = slots_of[size_t(e)];
    if (slots.empty()) continue;
    const int64_t n = int64_t(slots.size());
    xs.resize(size_t(n * H));
    for (int64_t s = 0; s < n; ++s)
      std::copy_n(&x[size_t(slots[size_t(s)] / K * H)], H, &xs[size_t(s * H)]);
    const TensorView gate_up = slice_leading(*lw.experts_gate_up, e);  // [2·Ie, H], gate rows first
    const TensorView down = slice_leading(*lw.experts_down, e);        // [H, Ie]
    gu.resize(size_t(n * 2 * Ie));
    matmul_into(xs.data(), n, gate_up, gu.data(), ex);
    act.resize(size_t(n * Ie));
    for (int64_t s = 0; s < n; ++s) {  // row by row, as for a single token
      const float* g = &gu[size_t(s * 2 * Ie)];
      float* a = &act[size_t(s * Ie)];
      if (ex.matmul) {
        std::copy_n(g, Ie, a);
        ops::gelu_tanh_mul(a, g + Ie, size_t(Ie));
      } else {
        for (int64_t i = 0; i < Ie; ++i) a[i] = ref::gelu_tanh(g[i]) * g[Ie + i];
      }
    }
    ys.resize(size_t(n * H));
    matmul_into(act.data(), n, down, ys.data(), ex);
    for (int64_t s = 0; s < n; ++s) std::copy_n(&ys[size_t(s * H)], H, &y_slots[size_t(slots[size_t(s)] * H)]);
  }
  Vec out(static_cast<size_t>(T * H), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const float w = weight[size_t(t * K + j)];
      const float* y = &y_slots[size_t((t * K + j) * H)];
      for (int64_t i = 0; i < H; ++i) out[size_t(t * H + i)] += w * y[i];
    }
  return out;
}

}  // namespace

RopeTables::RopeTables(const ModelConfig& c)
    : sliding(inv_freq(c.rope_sliding, c.head_dim)), full(inv_freq(c.rope_full, c.global_head_dim)) {}

RopeTables::RopeTables(const ModelConfig& c, const std::vector<int64_t>& positions) : RopeTables(c) {
  sliding_at = angles_at(sliding, positions);
  full_at = angles_at(full, positions);
}

Vec linear(const Vec& x, int64_t T, const TensorView& w, const Exec& ex) {
  Vec y(static_cast<size_t>(T * w.shape[0]));
  matmul_into(x.data(), T, w, y.data(), ex);
  return y;
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

Vec embed(const Model& m, const std::vector<int>& tokens) {
  const int64_t H = m.config.hidden_size, T = int64_t(tokens.size());
  Vec x(static_cast<size_t>(T * H));
  const float scale = embedding_scale(H, m.weights.dtype);
  m.weights.embed_tokens->will_read_rows(tokens);  // one wait for the disk, not T (tensor_view.h)
  for (int64_t t = 0; t < T; ++t) {
    m.weights.embed_tokens->row_to_f32(tokens[size_t(t)], &x[size_t(t * H)]);
    for (int64_t i = 0; i < H; ++i) x[size_t(t * H + i)] *= scale;
  }
  return x;
}

Vec per_layer_inputs(const Model& m, const std::vector<int>& tokens, const Vec& x, const Exec& ex) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int64_t H = c.hidden_size, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input, T = int64_t(tokens.size());
  // The table's rows are read from disk (if they must be) while the projection runs.
  w.embed_per_layer->will_read_rows(tokens);
  Vec ctx = linear(x, T, *w.per_layer_model_projection, ex);  // [T, L·P] from the scaled embeddings
  const float hs = float(1.0 / std::sqrt(double(H)));
  scale_in_place(ex, ctx, hs, L * P);
  rms_norm(ex, ctx.data(), T * L, P, w.per_layer_projection_norm, float(c.rms_norm_eps));  // per [P] slice
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
  const auto& inv_freq = rope.for_layer(p);
  const RopeTables::Angles& angles = rope.angles_for_layer(p);
  thread_local Vec kept;
  Scratch h(kept, size_t(T * H));
  std::copy(x.begin(), x.end(), h.data());
  rms_norm(ex, h.data(), T, H, lw.input_norm, eps);
  Qkv out;
  // q [T, nH, hd] (in the storage handed in, when it is long enough); unless KV-shared, k
  // [T, kvh, hd] and v (K=V layers: v from the raw key projection). One hand-off for all three.
  out.q = std::move(q_storage);
  if (out.q.size() < size_t(T * nH * hd)) out.q.resize(size_t(T * nH * hd));
  if (!p.kv_shared) {
    out.k.resize(size_t(T * kvh * hd));
    out.v.resize(out.k.size());
  }
  std::vector<ops::Product> products;
  for (const TensorView* w : qkv_weights(m, layer))
    products.push_back({w, w == lw.q_proj ? out.q.data() : w == lw.k_proj ? out.k.data() : out.v.data()});
  products_into(h.data(), T, products, ex);
  warm_next(ex, T, {lw.o_proj});
  rms_norm(ex, out.q.data(), T * nH, hd, lw.q_norm, eps);
  rope_rows(ex, out.q.data(), T, nH, hd, inv_freq, angles, positions);
  if (p.kv_shared) return out;
  if (!lw.v_proj) out.v = out.k;  // K=V: the raw key projection, before k_norm and RoPE
  rms_norm(ex, out.k.data(), T * kvh, hd, lw.k_norm, eps);
  rope_rows(ex, out.k.data(), T, kvh, hd, inv_freq, angles, positions);
  rms_norm(ex, out.v.data(), T * kvh, hd, nullptr, eps);  // v_norm: no weight, no RoPE
  return out;
}

void attention_output(const Model& m, int layer, const Vec& a, Vec& x, const Exec& ex) {
  const int64_t H = m.config.hidden_size, T = int64_t(x.size()) / H;
  thread_local Vec kept;
  Scratch o(kept, size_t(T * H));  // [T, H]
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  matmul_into(a.data(), T, *lw.o_proj, o.data(), ex);
  warm_next(ex, T, {lw.gate_proj, lw.up_proj});
  rms_norm(ex, o.data(), T, H, lw.post_attention_norm, float(m.config.rms_norm_eps));
  add_in_place(ex, x.data(), o.data(), T, H);
}

void feed_forward(const Model& m, int layer, Vec& x, const Exec& ex) {
  const ModelConfig& c = m.config;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H;
  const float eps = float(c.rms_norm_eps);
  Vec in = x;
  rms_norm(ex, in.data(), T, H, lw.pre_feedforward_norm, eps);
  thread_local Vec kept;
  Scratch mo(kept, size_t(T * H));  // [T, H]
  gated_mlp(in, T, *lw.gate_proj, *lw.up_proj, *lw.down_proj, mo.data(), ex);
  const std::vector<const TensorView*> next = c.has_ple() ? std::vector<const TensorView*>{lw.ple_input_gate} : after_layer(m, layer);
  if (!c.layers[size_t(layer)].moe) warm_next(ex, T, next);
  if (c.layers[size_t(layer)].moe) {
    rms_norm(ex, mo.data(), T, H, lw.post_feedforward_norm_1, eps);
    Vec experts_in = x;  // experts read pre_feedforward_layernorm_2(residual); the router the raw residual
    rms_norm(ex, experts_in.data(), T, H, lw.pre_feedforward_norm_2, eps);
    Vec e = moe_block(c, lw, x, experts_in, T, ex);
    rms_norm(ex, e.data(), T, H, lw.post_feedforward_norm_2, eps);
    add_in_place(ex, mo.data(), e.data(), T, H);
    warm_next(ex, T, next);
  }
  rms_norm(ex, mo.data(), T, H, lw.post_feedforward_norm, eps);
  add_in_place(ex, x.data(), mo.data(), T, H);
}

void per_layer_tail(const Model& m, int layer, Vec& x, const Vec& ple, const Exec& ex) {
  const ModelConfig& c = m.config;
  const LayerWeights& lw = m.weights.layers[size_t(layer)];
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input;
  if (P > 0) {
    thread_local Vec kept_g, kept_y;
    Scratch g(kept_g, size_t(T * P));  // [T, P]
    matmul_into(x.data(), T, *lw.ple_input_gate, g.data(), ex);
    warm_next(ex, T, {lw.ple_projection});
    for_row_ranges(ex, T, P, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* pl = &ple[size_t((t * L + layer) * P)];
        if (ex.matmul) {
          ops::gelu_tanh_mul(g.data() + t * P, pl, size_t(P));
          continue;
        }
        for (int64_t j = 0; j < P; ++j) {
          float& gv = g.data()[t * P + j];
          gv = ref::gelu_tanh(gv) * pl[j];
        }
      }
    });
    Scratch y(kept_y, size_t(T * H));  // [T, H]
    matmul_into(g.data(), T, *lw.ple_projection, y.data(), ex);
    warm_next(ex, T, after_layer(m, layer));
    rms_norm(ex, y.data(), T, H, lw.ple_post_norm, float(c.rms_norm_eps));
    add_in_place(ex, x.data(), y.data(), T, H);
  }
  const float scalar = lw.layer_scalar->at(0);  // the whole stream, every layer
  scale_in_place(ex, x, scalar, H);
}

Vec logits(const Model& m, Vec x, const Exec& ex) {
  Vec out;
  logits_into(m, std::move(x), ex, out);
  return out;
}

void logits_into(const Model& m, Vec x, const Exec& ex, Vec& out) {
  const ModelConfig& c = m.config;
  const TensorView& head = *m.weights.lm_head;
  const int64_t H = c.hidden_size, T = int64_t(x.size()) / H;
  rms_norm(ex, x.data(), T, H, m.weights.final_norm, float(c.rms_norm_eps));
  out.resize(size_t(T * head.shape[0]));  // every value is written by the product below
  matmul_into(x.data(), T, head, out.data(), ex);  // tied head, no sqrt(H)
  if (c.final_logit_softcapping) {
    const float cap = float(*c.final_logit_softcapping);
    if (ex.matmul) {
      // Element by element, so the pool may split even one row's 262144 logits (no bit changes).
      constexpr int64_t kPiece = 256;  // a multiple of every SIMD width
      const int64_t n = int64_t(out.size()), pieces = (n + kPiece - 1) / kPiece;
      for_row_ranges(ex, pieces, kPiece, [&](int64_t b, int64_t e) {
        const int64_t i0 = b * kPiece, i1 = std::min(n, e * kPiece);
        ops::softcap(out.data() + i0, size_t(i1 - i0), cap);
      });
    } else {
      for (float& v : out) v = cap * std::tanh(v / cap);
    }
  }
}

}  // namespace g4::blocks
