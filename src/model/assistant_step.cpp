#include "model/assistant_step.h"

#include <algorithm>
#include <numeric>

#include "model/gemma4.h"
#include "ops/attention/attention_kernels.h"
#include "ops/matmul/dot_kernels.h"
#include "ops/ref/reference_ops.h"
#include "ops/rows/row_reductions.h"
#include "platform/error.h"
#include "platform/row_interleave.h"
#include "platform/scope_timer.h"

namespace g4 {

namespace {

using blocks::Vec;

// a [nH, hd] = softmax(q · Kᵀ) V over the target's cached K/V of drafter layer `layer`'s type:
// positions [0, pos) on full layers, the newest min(pos, W+1) on sliding ones. Scale 1.0, GQA.
// Reference: the keys gathered to f32 and ref::attend_row (the spec). SIMD: the engine's
// one-row kernel (ops::attend_row, f32 FMA) over the store's own spans, widened in registers
// (exact), so only the summation order differs; on the calling thread, since a row of a few
// hundred keys costs less than waking the pool.
void attend_target_kv(const AssistantModel& d, int layer, const KvStore& kv, int seq, int64_t pos, const Vec& q, Vec& a,
                      const blocks::Exec& ex) {
  const ModelConfig& c = d.config.text;
  const LayerPlan& p = c.layers[size_t(layer)];
  const int64_t hd = p.head_dim, kvh = p.kv_heads, nH = c.num_attention_heads;
  const int64_t first = p.type == LayerType::Sliding ? std::max<int64_t>(0, pos - (c.sliding_window + 1)) : 0;
  const int64_t n = pos - first;
  const int src = d.pairing.target_layer(p.type);
  ScopeTimer timer(ex.times ? &ex.times->attention_s : nullptr);
  if (ex.simd()) {
    std::vector<ops::KvSpan> spans;
    Vec k, v;  // [n, kvh, hd] each, only for a store without views
    if (!kv.view(src, seq, first, pos, spans)) {
      k.resize(static_cast<size_t>(n * kvh * hd));
      v.resize(k.size());
      kv.read(src, seq, first, pos, k.data(), v.data());
      spans.push_back({ops::KvElem::F32, n, k.data(), v.data(), nullptr, nullptr});
    }
    ops::attend_row(q.data(), nH, ops::KvSpans{spans.data(), spans.size(), kvh, hd}, 0, n, a.data());
    return;
  }
  Vec k(static_cast<size_t>(n * kvh * hd)), v(k.size());  // [n, kvh, hd] each
  kv.read(src, seq, first, pos, k.data(), v.data());
  ref::attend_row(q.data(), k.data(), v.data(), n, nH, kvh, hd, a.data());
}

// The candidates' rows lie scattered over the head (E2B: 4096 of 262144 rows, 512 bytes each):
// each one's cache lines are requested this many rows ahead, so its memory latency overlaps the
// dots before it.
constexpr int64_t kPrefetchRows = 8;

// sel[i] = head[rows[i]] · y (y [H]). Reference: each row widened, ref::dot. SIMD: the dot
// kernels on each row as stored (F32/BF16/F16 widened in registers, Q8_0/Q4_0 blocks), other
// dtypes widened first; the rows split over the pool, each row's sum computed alone.
void score_rows(const TensorView& head, const std::vector<int>& rows, const Vec& y, const blocks::Exec& ex, Vec& sel) {
  const int64_t H = head.shape.back();
  sel.resize(rows.size());
  if (!ex.simd()) {
    Vec row(static_cast<size_t>(H));
    for (size_t i = 0; i < rows.size(); ++i) {
      head.row_to_f32(rows[i], row.data());
      sel[i] = ref::dot(row.data(), y.data(), H);
    }
    return;
  }
  const bool floats = head.dtype == DType::F32 || head.dtype == DType::BF16 || head.dtype == DType::F16;
  const bool row_major = !dtype_is_interleaved(head.dtype);
  const uint64_t row_bytes_of = row_major ? row_bytes(head.dtype, H) : 0;
  ex.for_rows(int64_t(rows.size()), H, [&](int64_t b, int64_t e) {
    Vec row;
    for (int64_t i = b; i < e; ++i) {
      if (i + kPrefetchRows < e) {
        const std::byte* ahead = head.data + uint64_t(rows[size_t(i + kPrefetchRows)]) * row_bytes_of;
        for (uint64_t at = 0; at < row_bytes_of; at += 64) __builtin_prefetch(ahead + at);
      }
      const int r = rows[size_t(i)];
      const std::byte* w = head.data + uint64_t(r) * row_bytes_of;  // row-major only
      float* out = &sel[size_t(i)];
      if (floats) {
        ops::dot_rows(y.data(), w, head.dtype, size_t(H), 0, 1, out);
      } else if (!row_major || !ops::dot_row_blocks(y.data(), w, head.dtype, size_t(H), out)) {
        row.resize(size_t(H));
        head.row_to_f32(r, row.data());
        ops::dot_rows(y.data(), row.data(), DType::F32, size_t(H), 0, 1, out);
      }
    }
  });
}

// The centroid-masked head, from scores = centroids · y [C]: the top_k centroids by falling
// score (lower index first on a tie); their clusters' tokens are the candidates, scored with the
// tied head's rows; every other token gets the minimum candidate logit - 1.
void centroid_head(const AssistantModel& d, const Vec& y, const Vec& scores, const blocks::Exec& ex, DraftStep& out) {
  const AssistantConfig& c = d.config;
  const int64_t C = c.num_centroids, per = c.tokens_per_centroid();
  std::vector<int> order(static_cast<size_t>(C));
  std::iota(order.begin(), order.end(), 0);
  const auto top = order.begin() + c.centroid_intermediate_top_k;
  std::partial_sort(order.begin(), top, order.end(), [&](int i, int j) {
    return scores[size_t(i)] > scores[size_t(j)] || (scores[size_t(i)] == scores[size_t(j)] && i < j);
  });
  out.candidates.clear();
  for (auto it = order.begin(); it != top; ++it)
    for (int64_t t = 0; t < per; ++t) out.candidates.push_back(d.token_ordering[size_t(*it * per + t)]);
  Vec sel;  // [candidates]
  score_rows(*d.stack->weights.embed_tokens, out.candidates, y, ex, sel);  // the tied head [V, H_d]
  const float fill = *std::min_element(sel.begin(), sel.end()) - 1.0f;
  out.logits.assign(size_t(c.text.vocab_size), fill);
  for (size_t i = 0; i < sel.size(); ++i) out.logits[size_t(out.candidates[i])] = sel[i];
}

}  // namespace

DraftStep draft_step(const AssistantModel& d, const Model& target, const KvStore& kv, int seq, int64_t pos, int token,
                     const float* hidden, const blocks::Exec& ex) {
  const ModelConfig& c = d.config.text;
  const Model& stack = *d.stack;
  const int64_t Ht = d.config.backbone_hidden_size, Hd = c.hidden_size;
  if (pos < 1) throw Error("draft: position " + std::to_string(pos) + ": a draft needs the target's row pos-1 (pos >= 1)");
  if (kv.length(seq) < pos)
    throw Error("draft: position " + std::to_string(pos) + " but the target's cache holds " +
                std::to_string(kv.length(seq)) + " positions of sequence " + std::to_string(seq));
  blocks::check_tokens(target.config, {token});
  // x = pre_projection · concat(E_t[token]·√H_t, h)                            [2·H_t] -> [H_d]
  Vec in = blocks::embed(target, {token});
  in.insert(in.end(), hidden, hidden + Ht);
  Vec x(static_cast<size_t>(Hd));
  ex.product(in.data(), 1, *d.pre_projection, x.data());
  const std::vector<int64_t> positions{pos};
  const blocks::RopeTables rope = ex.simd() ? blocks::RopeTables(c, positions) : blocks::RopeTables(c);
  int64_t widest = 0;
  for (const LayerPlan& p : c.layers) widest = std::max<int64_t>(widest, p.head_dim);
  Vec a(static_cast<size_t>(c.num_attention_heads * widest)), q_storage;  // [nH, hd]
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    blocks::Qkv qkv = blocks::project_qkv(stack, i, x, positions, rope, ex, std::move(q_storage));  // q only
    attend_target_kv(d, i, kv, seq, pos, qkv.q, a, ex);
    q_storage = std::move(qkv.q);
    blocks::attention_output(stack, i, a, x, ex);
    blocks::feed_forward(stack, i, x, ex);
    blocks::per_layer_tail(stack, i, x, {}, ex);  // no per-layer inputs: the layer scalar only
  }
  ex.rms_norm(x.data(), 1, Hd, stack.weights.final_norm, float(c.rms_norm_eps));  // y [H_d]
  // The head's product and h_next = post_projection · y share their input: one hand-off to the
  // pool where both take the same bf16 or int8 kernel (ops::matmul_shared_input), else two.
  DraftStep out;
  out.h_next.resize(size_t(Ht));
  if (d.config.use_ordered_embeddings) {
    Vec scores(static_cast<size_t>(d.config.num_centroids));  // [C]
    ex.products(x.data(), 1, {{d.centroids, scores.data()}, {d.post_projection, out.h_next.data()}});
    centroid_head(d, x, scores, ex, out);
  } else {
    out.logits.resize(size_t(c.vocab_size));  // [V]
    ex.products(x.data(), 1, {{stack.weights.embed_tokens, out.logits.data()}, {d.post_projection, out.h_next.data()}});
  }
  // The first largest logit: ops::argmax gives the scalar scan's answer over [V] in SIMD lanes.
  out.token = ex.simd() ? int(ops::argmax(out.logits.data(), int64_t(out.logits.size())))
                        : int(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
  return out;
}

std::vector<DraftStep> draft(const AssistantModel& d, const Model& target, const KvStore& kv, int seq, int64_t pos, int token,
                             const std::vector<float>& hidden, int k, const blocks::Exec& ex) {
  if (hidden.size() != size_t(d.config.backbone_hidden_size))
    throw Error("draft: hidden state has " + std::to_string(hidden.size()) + " values, expected backbone_hidden_size = " +
                std::to_string(d.config.backbone_hidden_size));
  std::vector<DraftStep> steps;
  steps.reserve(size_t(std::max(k, 0)));
  int tok = token;
  const float* h = hidden.data();
  for (int j = 0; j < k; ++j) {
    steps.push_back(draft_step(d, target, kv, seq, pos, tok, h, ex));
    tok = steps.back().token;
    h = steps.back().h_next.data();
  }
  return steps;
}

}  // namespace g4
