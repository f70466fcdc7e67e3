#include "model/gemma4_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/ref/reference_ops.h"

namespace g4::blocks {

namespace {

// Which experts each token chose, and with what weight: slot t·K + j is token t's j-th expert.
struct Routing {
  std::vector<float> weight;                    // [T·K]
  std::vector<std::vector<int64_t>> slots_of;  // per expert, its slots in token order
};

Routing route(const ModelConfig& c, const LayerWeights& lw, const Vec& r, int64_t T, const Exec& ex) {
  const int64_t H = c.hidden_size, E = c.num_experts, K = c.top_k_experts;
  // Router input: the raw residual, rmsnorm without weight, * scale * H^-0.5.
  Vec z = r;
  ex.rms_norm(z.data(), T, H, nullptr, float(c.rms_norm_eps));
  const float hs = float(1.0 / std::sqrt(double(H)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) z[size_t(t * H + i)] *= lw.router_scale->at(i) * hs;
  Vec probs = ex.linear(z, T, *lw.router_proj);  // [T, E]
  Routing out{std::vector<float>(size_t(T * K)), std::vector<std::vector<int64_t>>(size_t(E))};
  std::vector<int64_t> order(static_cast<size_t>(E));
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
      out.weight[size_t(t * K + j)] = p[e] / sum * lw.router_per_expert_scale->at(e);
      out.slots_of[size_t(e)].push_back(t * K + j);
    }
  }
  return out;
}

// Expert e on the n tokens that chose it (its weights read once per step, not once per token),
// each row computed as it would be alone; outputs to y_slots [T·K, H] at the tokens' slots.
void run_expert(const ModelConfig& c, const LayerWeights& lw, int64_t e, const std::vector<int64_t>& slots, const Vec& x,
                const Exec& ex, Vec& y_slots) {
  const int64_t H = c.hidden_size, K = c.top_k_experts, Ie = c.moe_intermediate_size, n = int64_t(slots.size());
  Vec xs(size_t(n * H));  // [n, H]
  for (int64_t s = 0; s < n; ++s) std::copy_n(&x[size_t(slots[size_t(s)] / K * H)], H, &xs[size_t(s * H)]);
  const TensorView gate_up = slice_leading(*lw.experts_gate_up, e);  // [2·Ie, H], gate rows first
  const TensorView down = slice_leading(*lw.experts_down, e);        // [H, Ie]
  Vec gu(size_t(n * 2 * Ie));                                        // [n, 2·Ie]
  ex.product(xs.data(), n, gate_up, gu.data());
  Vec act(size_t(n * Ie));  // [n, Ie] = gelu(gate) ⊙ up
  for (int64_t s = 0; s < n; ++s) {
    const float* g = &gu[size_t(s * 2 * Ie)];
    std::copy_n(g, Ie, &act[size_t(s * Ie)]);
    ex.gelu_tanh_mul(&act[size_t(s * Ie)], g + Ie, size_t(Ie));
  }
  Vec ys(size_t(n * H));  // [n, H]
  ex.product(act.data(), n, down, ys.data());
  for (int64_t s = 0; s < n; ++s) std::copy_n(&ys[size_t(s * H)], H, &y_slots[size_t(slots[size_t(s)] * H)]);
}

}  // namespace

// Every token sums its experts' outputs in its own selection order, so the result is the same,
// to the bit, as running the tokens one at a time.
Vec moe_block(const ModelConfig& c, const LayerWeights& lw, const Vec& r, const Vec& x, int64_t T, const Exec& ex) {
  const int64_t H = c.hidden_size, E = c.num_experts, K = c.top_k_experts;
  const Routing routing = route(c, lw, r, T, ex);
  Vec y_slots(static_cast<size_t>(T * K * H));  // [T·K, H]: expert output per slot
  for (int64_t e = 0; e < E; ++e)
    if (!routing.slots_of[size_t(e)].empty()) run_expert(c, lw, e, routing.slots_of[size_t(e)], x, ex, y_slots);
  Vec out(static_cast<size_t>(T * H), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const float w = routing.weight[size_t(t * K + j)];
      const float* y = &y_slots[size_t((t * K + j) * H)];
      for (int64_t i = 0; i < H; ++i) out[size_t(t * H + i)] += w * y[i];
    }
  return out;
}

}  // namespace g4::blocks
