#include "model/vision_encoder_layer.h"

#include <algorithm>

#include "ops/attention/attention_kernels.h"
#include "ops/ref/reference_ops.h"
#include "platform/scope_timer.h"

namespace g4 {

using blocks::Vec;

namespace {

// Clamps rows of `width` values to [lo, hi].
void clamp_rows(float* x, int64_t rows, int64_t width, float lo, float hi, const blocks::Exec& ex) {
  ex.for_rows(rows, width, [&](int64_t b, int64_t e) {
    for (int64_t i = b * width; i < e * width; ++i) x[i] = std::clamp(x[i], lo, hi);
  });
}

// Query rows attended together on the SIMD path: each tile of keys and values is read once for
// the whole block instead of once per row (a 2394-patch image streams its 7 MB of K and V per
// row otherwise, and attention took 5x the products' time).
constexpr int64_t kQueryBlock = 64;

// a [N, nh, d] = attention of every patch over every patch. Reference: ref::attend_row per row;
// SIMD: the f32 attention kernel over blocks of kQueryBlock rows of one head (rows do not
// interact, so a row's result does not depend on its block), (head, block) items split over the
// pool. Both scale by 1.0 and take the softmax in f32.
void attend_all(const VisionConfig& c, const Vec& q, const Vec& k, const Vec& v, int64_t N, Vec& a,
                const blocks::Exec& ex) {
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, d = c.head_dim;
  ScopeTimer timer(ex.times ? &ex.times->attention_s : nullptr);
  if (!ex.simd()) {
    for (int64_t t = 0; t < N; ++t)
      ref::attend_row(&q[size_t(t * nh * d)], k.data(), v.data(), N, nh, nkv, d, &a[size_t(t * nh * d)]);
    return;
  }
  const ops::KvSpan span{ops::KvElem::F32, N, k.data(), v.data(), nullptr, nullptr};
  const ops::KvSpans spans{&span, 1, nkv, d};
  const int64_t blocks = (N + kQueryBlock - 1) / kQueryBlock;
  // One item is kQueryBlock rows of one head against all N keys: that is what the split weighs.
  ex.for_rows(nh * blocks, kQueryBlock * N * d, [&](int64_t b, int64_t e) {
    Vec qb(static_cast<size_t>(kQueryBlock * d)), o(qb.size()), out(qb.size());  // [block, d]
    Vec m(static_cast<size_t>(kQueryBlock)), l(m.size());                         // [block]
    for (int64_t item = b; item < e; ++item) {
      const int64_t h = item / blocks, t0 = (item % blocks) * kQueryBlock, rows = std::min(kQueryBlock, N - t0);
      for (int64_t r = 0; r < rows; ++r)  // the block's query rows of head h, [rows, d]
        std::copy_n(&q[size_t(((t0 + r) * nh + h) * d)], d, &qb[size_t(r * d)]);
      ops::attend_partial(qb.data(), rows, spans, h / (nh / nkv), 0, N, o.data(), m.data(), l.data());
      ops::attend_finish(rows, d, o.data(), l.data(), out.data());
      for (int64_t r = 0; r < rows; ++r) std::copy_n(&out[size_t(r * d)], d, &a[size_t(((t0 + r) * nh + h) * d)]);
    }
  });
}

// x += post_attention_norm(o_proj(attention(input_norm(x))))
void vision_attention_block(const VisionConfig& c, const VisionLayerWeights& lw, const VisionRope& rope, Vec& x,
                            const blocks::Exec& ex) {
  const int64_t Hv = c.hidden_size, N = int64_t(x.size()) / Hv, d = c.head_dim;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const float eps = float(c.rms_norm_eps);
  Vec h = x;
  ex.rms_norm(h.data(), N, Hv, lw.input_norm, eps);
  Vec q(size_t(N * nh * d)), k(size_t(N * nkv * d)), v(k.size());
  if (!lw.q_proj.clipped && !lw.k_proj.clipped && !lw.v_proj.clipped) {
    ex.products(h.data(), N, {{lw.q_proj.weight, q.data()}, {lw.k_proj.weight, k.data()}, {lw.v_proj.weight, v.data()}});
  } else {
    clipped_product(h.data(), N, lw.q_proj, q.data(), ex);
    clipped_product(h.data(), N, lw.k_proj, k.data(), ex);
    clipped_product(h.data(), N, lw.v_proj, v.data(), ex);
  }
  ex.rms_norm(q.data(), N * nh, d, lw.q_norm, eps);
  ex.rms_norm(k.data(), N * nkv, d, lw.k_norm, eps);
  ex.rms_norm(v.data(), N * nkv, d, nullptr, eps);  // v_norm: no weight, no RoPE
  ex.for_rows(N, nh * d, [&](int64_t b, int64_t e) {
    rope.apply(q.data(), nh, d, b, e);
    rope.apply(k.data(), nkv, d, b, e);
  });
  Vec a(q.size());  // [N, nh, d]
  attend_all(c, q, k, v, N, a, ex);
  Vec o(size_t(N * Hv));
  clipped_product(a.data(), N, lw.o_proj, o.data(), ex);
  ex.rms_norm(o.data(), N, Hv, lw.post_attention_norm, eps);
  ex.add(x.data(), o.data(), N, Hv);
}

// x += post_feedforward_norm(down(gelu_tanh(gate(h)) · up(h))), h = pre_feedforward_norm(x)
void vision_mlp_block(const VisionConfig& c, const VisionLayerWeights& lw, Vec& x, const blocks::Exec& ex) {
  const int64_t Hv = c.hidden_size, N = int64_t(x.size()) / Hv, Iv = c.intermediate_size;
  const float eps = float(c.rms_norm_eps);
  Vec h = x;
  ex.rms_norm(h.data(), N, Hv, lw.pre_feedforward_norm, eps);
  Vec g(size_t(N * Iv)), u(g.size());
  if (!lw.gate_proj.clipped && !lw.up_proj.clipped) {
    ex.products(h.data(), N, {{lw.gate_proj.weight, g.data()}, {lw.up_proj.weight, u.data()}});
  } else {
    clipped_product(h.data(), N, lw.gate_proj, g.data(), ex);
    clipped_product(h.data(), N, lw.up_proj, u.data(), ex);
  }
  ex.for_rows(N, Iv, [&](int64_t b, int64_t e) { ex.gelu_tanh_mul(&g[size_t(b * Iv)], &u[size_t(b * Iv)], size_t((e - b) * Iv)); });
  Vec m(size_t(N * Hv));
  clipped_product(g.data(), N, lw.down_proj, m.data(), ex);
  ex.rms_norm(m.data(), N, Hv, lw.post_feedforward_norm, eps);
  ex.add(x.data(), m.data(), N, Hv);
}

}  // namespace

VisionRope::VisionRope(const VisionConfig& c, std::span<const int32_t> positions) : quarter(c.head_dim / 4) {
  const std::vector<float> inv_freq = ref::rope_inv_freq_default(c.head_dim / 2, c.rope_theta);  // d/4 entries
  const size_t N = positions.size() / 2;
  for (Vec* t : {&cos_x, &sin_x, &cos_y, &sin_y}) t->resize(N * size_t(quarter));
  for (size_t i = 0; i < N; ++i) {
    const size_t at = i * size_t(quarter);
    ref::rope_cos_sin(inv_freq, positions[2 * i], &cos_x[at], &sin_x[at]);
    ref::rope_cos_sin(inv_freq, positions[2 * i + 1], &cos_y[at], &sin_y[at]);
  }
}

void VisionRope::apply(float* x, int64_t heads, int64_t d, int64_t b, int64_t e) const {
  const int64_t half = d / 2;
  for (int64_t t = b; t < e; ++t) {
    const size_t at = size_t(t * quarter);
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x + (t * heads + h) * d;
      ref::rope_rotate(head, 1, half, &cos_x[at], &sin_x[at]);         // [0, d/2): by x
      ref::rope_rotate(head + half, 1, half, &cos_y[at], &sin_y[at]);  // [d/2, d): by y
    }
  }
}

void clipped_product(const float* x, int64_t T, const ClippedLinear& l, float* y, const blocks::Exec& ex) {
  if (!l.clipped) {
    ex.product(x, T, *l.weight, y);
    return;
  }
  const int64_t in = l.weight->shape[1], out = l.weight->shape[0];
  Vec xc(x, x + T * in);
  clamp_rows(xc.data(), T, in, l.input_min, l.input_max, ex);
  ex.product(xc.data(), T, *l.weight, y);
  clamp_rows(y, T, out, l.output_min, l.output_max, ex);
}

void vision_encoder_layer(const VisionConfig& c, const VisionLayerWeights& lw, const VisionRope& rope, Vec& x,
                          const blocks::Exec& ex) {
  vision_attention_block(c, lw, rope, x, ex);
  vision_mlp_block(c, lw, x, ex);
}

}  // namespace g4
