#include "model/forward_reference.h"

#include <algorithm>
#include <cmath>

#include "model/gemma4.h"
#include "ops/ref/reference_ops.h"
#include "platform/error.h"

namespace g4 {

std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens) {
  return forward_reference(m, tokens, {});
}

std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens, const std::vector<SoftSpan>& soft) {
  const ModelConfig& c = m.config;
  const int64_t T = int64_t(tokens.size()), nH = c.num_attention_heads;
  if (T == 0) throw Error("forward: empty token sequence");
  blocks::check_tokens(c, tokens);
  const RowSpans spans = place_spans(soft, T);
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[size_t(t)] = t;  // one sequence from position 0
  // On sliding layers a row of an image may see the rest of it (the "vision" rule); empty: causal.
  const std::vector<int64_t> key_ends = sliding_key_ends(c, spans, positions);
  // Keys are the whole sequence's (k, v: [T, kvh, hd]); causal, and sliding layers see keys
  // with q - k < window, in position space.
  const blocks::Attend attend = [&](int layer, const blocks::Vec& q, const blocks::Vec& k, const blocks::Vec& v,
                                    blocks::Vec& a) {
    const LayerPlan& p = c.layers[size_t(layer)];
    const bool sliding = p.type == LayerType::Sliding;
    const int64_t hd = p.head_dim, kvh = p.kv_heads;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t first = sliding ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
      const int64_t last = sliding && !key_ends.empty() ? key_ends[size_t(t)] : t;
      ref::attend_row(&q[size_t(t * nH * hd)], &k[size_t(first * kvh * hd)], &v[size_t(first * kvh * hd)],
                      last - first + 1, nH, kvh, hd, &a[size_t(t * nH * hd)]);
    }
  };
  const blocks::Exec ex;  // reference loops, always
  blocks::StepKv kv;
  blocks::Vec x = blocks::decoder_stack(m, tokens, positions, ex, attend, kv, spans);
  return blocks::logits(m, std::move(x), ex);
}

}  // namespace g4
