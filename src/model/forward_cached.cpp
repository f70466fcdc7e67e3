#include "model/forward_cached.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>

#include "model/decoder_blocks.h"
#include "ops/ref/reference_ops.h"
#include "ops/attention/attention_bf16.h"
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/attention/attention_int8.h"
#include "ops/attention/attention_kernels.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/quantize_int8.h"
#include "platform/thread_pool.h"

namespace g4 {

namespace {

// Consecutive rows of one sequence within a step.
struct Group {
  int seq;
  size_t row_begin, row_end;
  int64_t pos_begin;
};

std::vector<Group> group_rows(const std::vector<BatchRow>& rows, const KvStore& kv) {
  std::vector<Group> groups;
  std::set<int> seen;
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& row = rows[r];
    if (!groups.empty() && groups.back().seq == row.seq) {
      const int64_t expect = groups.back().pos_begin + int64_t(r - groups.back().row_begin);
      if (row.pos != expect)
        throw Error("batch: sequence " + std::to_string(row.seq) + " row " + std::to_string(r) + " has position " +
                    std::to_string(row.pos) + ", expected " + std::to_string(expect) + " (rows must be consecutive)");
      groups.back().row_end = r + 1;
      continue;
    }
    if (!seen.insert(row.seq).second)
      throw Error("batch: sequence " + std::to_string(row.seq) + " appears in two separate runs of rows");
    const int64_t len = kv.length(row.seq);
    if (row.pos != len)
      throw Error("batch: sequence " + std::to_string(row.seq) + " starts at position " + std::to_string(row.pos) +
                  " but its cache holds " + std::to_string(len) + " positions");
    groups.push_back({row.seq, r, r + 1, row.pos});
  }
  return groups;
}

// The reference path: gathers every key to f32 (KvStore::read) and runs ref::attend_row.
void attend_layer_reference(const KvStore& kv, int src, bool sliding, int64_t W, int64_t nH, int64_t kvh, int64_t hd,
                            const std::vector<Group>& groups, const std::vector<int64_t>& positions, const blocks::Vec& q,
                            const blocks::Vec& sk, const blocks::Vec& sv, blocks::Vec& a) {
  const int64_t row_w = kvh * hd;
  blocks::Vec keys, values;
  for (const Group& g : groups) {
    const int64_t n_step = int64_t(g.row_end - g.row_begin);
    // Keys: cached positions [first_cached, pos_begin) then this step's rows.
    const int64_t first_cached = sliding ? std::max<int64_t>(0, g.pos_begin - W + 1) : 0;
    const int64_t n_cached = g.pos_begin - first_cached;
    keys.resize(size_t((n_cached + n_step) * row_w));
    values.resize(keys.size());
    if (n_cached > 0) kv.read(src, g.seq, first_cached, g.pos_begin, keys.data(), values.data());
    std::copy(sk.begin() + ptrdiff_t(g.row_begin * row_w), sk.begin() + ptrdiff_t(g.row_end * row_w),
              keys.begin() + ptrdiff_t(n_cached * row_w));
    std::copy(sv.begin() + ptrdiff_t(g.row_begin * row_w), sv.begin() + ptrdiff_t(g.row_end * row_w),
              values.begin() + ptrdiff_t(n_cached * row_w));
    for (size_t r = g.row_begin; r < g.row_end; ++r) {
      const int64_t pos = positions[r];
      const int64_t first = sliding ? std::max<int64_t>(first_cached, pos - W + 1) : 0;  // q - k < W
      const int64_t off = first - first_cached;
      ref::attend_row(&q[r * size_t(nH * hd)], &keys[size_t(off * row_w)], &values[size_t(off * row_w)],
                         pos - first + 1, nH, kvh, hd, &a[r * size_t(nH * hd)]);
    }
  }
}

// The bf16 attention kernel runs under compute = bf16 over a store whose views hold bf16.
bool bf16_attention_for(std::optional<ops::KvElem> elem, const blocks::Exec& ex) {
  return ex.matmul && ex.matmul->bf16_compute && elem == ops::KvElem::BF16 && ops::attention_bf16_available();
}

// The bf16 kernel's rows run on tiles (every row of the layer) where the context has them and the
// layer's shape fits them.
ops::Bf16Tiles attention_tiles_for(std::optional<ops::KvElem> elem, const blocks::Exec& ex, int64_t group, int64_t hd) {
  return bf16_attention_for(elem, ex) && ops::attention_tiles_fit(group, hd) ? ex.matmul->attention_tiles
                                                                             : ops::Bf16Tiles::None;
}

// The int8 attention kernel runs under activations = q8 over a store whose views hold int8.
bool int8_attention_for(std::optional<ops::KvElem> elem, const blocks::Exec& ex) {
  return ex.matmul && ex.matmul->int8_activations && elem == ops::KvElem::I8 && ops::attention_int8_available();
}

// Attention of one layer for every row of the step on the SIMD kernel (ex.matmul set), over the
// cache's K/V in their stored element type (KvStore::view; a store without views is gathered
// with read() instead) followed by this step's rows. Same keys per row as the reference path:
// cached positions [first, pos_begin) then the step's rows up to the row itself. Work items are
// (row, kv head, slice of ex.attention_slice keys from the row's first key), so decode (one row,
// often one kv head) still spreads over the pool; the slices' softmax states are merged in order
// afterwards. Neither the slices nor the kernel's tiles depend on the batch, the chunking, the
// spans or the thread count, so a row's result is bit-identical however it was scheduled.
// This step's own K/V rows ([T, kvh, hd]) in the element type the store keeps (view_element; f32
// for a store without views), rounded exactly as it will store them (f32_to_bf16, f32_to_f16, or
// quantize_int8_symmetric per (row, head): as KvRows::write). A row then sees the same keys whether
// an earlier row of its sequence came in this step or a past one, on every kernel: chunking and
// batching change no bit. (Before, the f32 kernel saw the step's rows unrounded.)
struct StepRows {
  ops::KvElem elem = ops::KvElem::F32;
  const float *kf = nullptr, *vf = nullptr;  // f32: the step's own vectors
  std::vector<uint16_t> kh, vh;             // bf16 or f16 bits
  std::vector<int8_t> kq, vq;               // int8
  std::vector<float> ks, vs;                // int8 scales [T, kvh]

  // Rows [row, row + n) as a span.
  ops::KvSpan span(size_t row, int64_t n, int64_t kvh, int64_t hd) const {
    const size_t at = row * size_t(kvh * hd);
    switch (elem) {
      case ops::KvElem::BF16:
      case ops::KvElem::F16: return {elem, n, &kh[at], &vh[at], nullptr, nullptr};
      case ops::KvElem::I8: return {elem, n, &kq[at], &vq[at], &ks[row * size_t(kvh)], &vs[row * size_t(kvh)]};
      case ops::KvElem::F32: break;
    }
    return {ops::KvElem::F32, n, kf + at, vf + at, nullptr, nullptr};
  }
};

StepRows round_step_rows(std::optional<ops::KvElem> elem, const blocks::Vec& sk, const blocks::Vec& sv, int64_t hd) {
  StepRows r;
  r.elem = elem.value_or(ops::KvElem::F32);
  r.kf = sk.data();
  r.vf = sv.data();
  switch (r.elem) {
    case ops::KvElem::BF16:
    case ops::KvElem::F16: {
      uint16_t (*round)(float) = r.elem == ops::KvElem::BF16 ? f32_to_bf16 : f32_to_f16;
      r.kh.resize(sk.size());
      r.vh.resize(sv.size());
      for (size_t i = 0; i < sk.size(); ++i) r.kh[i] = round(sk[i]);
      for (size_t i = 0; i < sv.size(); ++i) r.vh[i] = round(sv[i]);
      break;
    }
    case ops::KvElem::I8:
      r.kq.resize(sk.size());
      r.vq.resize(sv.size());
      r.ks.resize(sk.size() / size_t(hd));
      r.vs.resize(r.ks.size());
      for (size_t row = 0; row < r.ks.size(); ++row) {
        r.ks[row] = quantize_int8_symmetric(&sk[row * size_t(hd)], hd, &r.kq[row * size_t(hd)]);
        r.vs[row] = quantize_int8_symmetric(&sv[row * size_t(hd)], hd, &r.vq[row * size_t(hd)]);
      }
      break;
    case ops::KvElem::F32: break;
  }
  return r;
}

struct AttnItem {
  size_t row;
  int64_t kh, begin, end;
  size_t group;  // index into groups (its spans)
  int n_split;   // slices of this (row, kv head); the first one carries the merged result
};

void attend_layer_simd(const KvStore& kv, int src, bool sliding, int64_t W, int64_t nH, int64_t kvh, int64_t hd,
                       const std::vector<Group>& groups, const std::vector<int64_t>& positions, const blocks::Vec& q,
                       const blocks::Vec& sk, const blocks::Vec& sv, blocks::Vec& a, const blocks::Exec& ex) {
  const int64_t row_w = kvh * hd, G = nH / kvh;
  const bool bf16 = uses_bf16_attention(kv, ex), int8 = uses_int8_attention(kv, ex);
  const ops::Bf16Tiles tiles = attention_tiles_for(kv.view_element(), ex, G, hd);
  const StepRows step = round_step_rows(kv.view_element(), sk, sv, hd);
  // Spans per group: the cached positions, then the step's rows of that group.
  std::vector<ops::KvSpan> spans;
  std::vector<size_t> span_begin(groups.size() + 1);
  std::vector<blocks::Vec> gathered;  // only for a store without views
  gathered.reserve(2 * groups.size());  // no reallocation: spans point into these
  std::vector<int64_t> first_cached(groups.size());
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    span_begin[gi] = spans.size();
    first_cached[gi] = sliding ? std::max<int64_t>(0, g.pos_begin - W + 1) : 0;
    const int64_t n_cached = g.pos_begin - first_cached[gi];
    if (n_cached > 0 && !kv.view(src, g.seq, first_cached[gi], g.pos_begin, spans)) {
      if (bf16 || int8) throw Error("KV store: view_element() promised bf16 or int8 views, but view() gave none");
      blocks::Vec& k = gathered.emplace_back(size_t(n_cached * row_w));
      blocks::Vec& v = gathered.emplace_back(size_t(n_cached * row_w));
      kv.read(src, g.seq, first_cached[gi], g.pos_begin, k.data(), v.data());
      spans.push_back({ops::KvElem::F32, n_cached, k.data(), v.data(), nullptr, nullptr});
    }
    spans.push_back(step.span(g.row_begin, int64_t(g.row_end - g.row_begin), kvh, hd));
  }
  span_begin[groups.size()] = spans.size();

  // Each row's keys: [begin, end) of its group's spans (the window applied: q - k < W).
  const int64_t T = int64_t(positions.size());
  std::vector<int64_t> key_begin(static_cast<size_t>(T)), key_end(static_cast<size_t>(T));
  std::vector<size_t> row_group(static_cast<size_t>(T));
  int64_t fmas = 0;  // q·k and p·v over every row's keys
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t r = groups[gi].row_begin; r < groups[gi].row_end; ++r) {
      const int64_t pos = positions[r];
      const int64_t first = sliding ? std::max<int64_t>(first_cached[gi], pos - W + 1) : 0;
      key_begin[r] = first - first_cached[gi];
      key_end[r] = pos - first_cached[gi] + 1;
      row_group[r] = gi;
      fmas += 2 * (key_end[r] - key_begin[r]) * nH * hd;
    }
  ThreadPool* pool = ex.matmul->pool;
  const bool parallel = pool && pool->size() > 1 && fmas >= ex.attention_parallel_min_fmas;
  // Slices of a fixed number of keys from each row's first key, merged in order: the same
  // arithmetic whatever the batch, the chunking or the number of threads.
  const int64_t slice = std::max<int64_t>(1, ex.attention_slice);
  std::vector<AttnItem> items;
  for (size_t r = 0; r < size_t(T); ++r) {
    const int64_t begin = key_begin[r], end = key_end[r];
    const int n_slices = int((end - begin + slice - 1) / slice);
    for (int64_t kh = 0; kh < kvh; ++kh)
      for (int64_t b = begin; b < end; b += slice)
        items.push_back({r, kh, b, std::min(end, b + slice), row_group[r], b == begin ? n_slices : 0});
  }
  const size_t state = size_t(G * hd + 2 * G);  // o [G, hd], m [G], l [G]
  // Every item writes its whole state before anything reads it, so the states are never cleared,
  // and up to kReusedStateFloats (decode, short prefill) they live in one buffer kept across
  // layers and steps: allocating and zeroing 16 states of 4 K floats per full layer at depth
  // 4096 was a fifth of the time the layer spent outside the kernel. A larger prefill step's
  // states are allocated for the step and not kept. (The lambda runs on pool threads: it reaches
  // this thread's buffer through `states`.)
  constexpr size_t kReusedStateFloats = size_t(1) << 22;  // 16 MiB
  thread_local std::vector<float> reused;
  std::unique_ptr<float[]> fresh;
  float* states;
  if (items.size() * state <= kReusedStateFloats) {
    if (reused.size() < items.size() * state) reused.resize(items.size() * state);
    states = reused.data();
  } else {
    fresh.reset(new float[items.size() * state]);
    states = fresh.get();
  }
  auto run = [&](size_t i) {
    const AttnItem& it = items[i];
    const ops::KvSpans ks{&spans[span_begin[it.group]], span_begin[it.group + 1] - span_begin[it.group], kvh, hd};
    float* o = states + i * state;
    float *m = o + G * hd, *l = m + G;
    const float* qr = &q[it.row * size_t(nH * hd) + size_t(it.kh * G * hd)];
    if (tiles != ops::Bf16Tiles::None)
      ops::attend_partial_bf16_tiles(tiles, qr, G, ks, it.kh, it.begin, it.end, o, m, l);
    else if (bf16)
      ops::attend_partial_bf16(qr, G, ks, it.kh, it.begin, it.end, o, m, l);
    else if (int8)
      ops::attend_partial_int8(qr, G, ks, it.kh, it.begin, it.end, o, m, l);
    else
      ops::attend_partial(qr, G, ks, it.kh, it.begin, it.end, o, m, l);
    if (it.n_split == 1) ops::attend_finish(G, hd, o, l, &a[it.row * size_t(nH * hd) + size_t(it.kh * G * hd)]);
  };
  // Each thread claims the next unclaimed item until none are left. A fixed deal (item i to
  // thread i mod threads, as before) waited for whichever thread the host had slowed or
  // descheduled; claimed, the other takes over its share (an E2B full layer at depth 4096,
  // AttendLayerFromCache, bf16 cache, 2 threads: 5.2-6.5 -> 6.3-6.7M positions/s alternated, Ice
  // Lake VM). Which thread runs an item changes no bit of it.
  if (parallel && items.size() > 1) {
    const int64_t nt = std::min<int64_t>(pool->size(), int64_t(items.size()));
    std::atomic<size_t> next{0};
    pool->parallel_for(nt, [&](int64_t, int64_t, int) {
      for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < items.size();
           i = next.fetch_add(1, std::memory_order_relaxed))
        run(i);
    });
  } else {
    for (size_t i = 0; i < items.size(); ++i) run(i);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const AttnItem& it = items[i];
    if (it.n_split > 1)  // the item's slices are items [i, i + n_split), in key order
      ops::attend_merge_finish(G, hd, states + i * state, state, it.n_split,
                               &a[it.row * size_t(nH * hd) + size_t(it.kh * G * hd)]);
  }
}

}  // namespace

bool uses_bf16_attention(const KvStore& kv, const blocks::Exec& ex) { return bf16_attention_for(kv.view_element(), ex); }
bool uses_int8_attention(const KvStore& kv, const blocks::Exec& ex) { return int8_attention_for(kv.view_element(), ex); }

std::string describe_attention(std::optional<ops::KvElem> elem, const blocks::Exec& ex) {
  if (!ex.matmul) return "reference loops (f32 K/V gathered from the cache)";
  if (bf16_attention_for(elem, ex) && ex.matmul->attention_tiles != ops::Bf16Tiles::None)
    return std::string("bf16 K/V x bf16-rounded queries and softmax weights on ") +
           ops::bf16_tiles_name(ex.matmul->attention_tiles) +
           " tiles (TDPBF16PS; attention kernel check passed), f32 accumulate and softmax, the heads of one kv head as "
           "one tile's rows, every row of a layer (decode and prefill); layers with more than 16 heads per kv head or "
           "a head dim not in steps of 32 on VDPBF16PS";
  if (bf16_attention_for(elem, ex))
    return "bf16 K/V x bf16-rounded queries and softmax weights on VDPBF16PS (AVX512_BF16), f32 accumulate and "
           "softmax";
  if (int8_attention_for(elem, ex))
    return "int8 K x int8-quantized queries on VPDPBUSD (AVX512_VNNI), exact int32 sums; int8 V widened to f32, FMA; "
           "f32 softmax";
  const char* stored = !elem ? "f32 (gathered)"
                       : *elem == ops::KvElem::BF16 ? "bf16"
                       : *elem == ops::KvElem::F16  ? "f16"
                       : *elem == ops::KvElem::I8   ? "int8"
                                                    : "f32";
  return std::string(stored) + " K/V widened to f32, f32 queries, FMA (SIMD), f32 softmax";
}

std::vector<float> forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex) {
  std::vector<float> logits;
  forward_cached(m, rows, kv, ex, logits);
  return logits;
}

void forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex,
                    std::vector<float>& logits) {
  using blocks::Vec;
  const ModelConfig& c = m.config;
  logits.clear();
  if (rows.empty()) return;
  const std::vector<Group> groups = group_rows(rows, kv);
  const int64_t T = int64_t(rows.size()), L = c.num_hidden_layers, nH = c.num_attention_heads, W = c.sliding_window;
  std::vector<int> tokens(rows.size());
  std::vector<int64_t> positions(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    tokens[r] = rows[r].token;
    positions[r] = rows[r].pos;
  }
  blocks::check_tokens(c, tokens);
  // Decode warms each next product's weights on the pool's workers (ops::warm_products); none of
  // that reading may outlive the step, whichever way it ends (the caller may free the model).
  struct StopWarm {
    ThreadPool* pool;
    ~StopWarm() {
      if (pool) pool->stop_warm();
    }
  } stop_warm{ex.matmul ? ex.matmul->pool : nullptr};
  // The SIMD path takes each row's RoPE cos/sin from tables built once for the step; the
  // reference path computes them per layer, as the spec does.
  const blocks::RopeTables rope = ex.matmul ? blocks::RopeTables(c, positions) : blocks::RopeTables(c);

  Vec x = blocks::embed(m, tokens);                                            // [T, H]
  const Vec ple = c.has_ple() ? blocks::per_layer_inputs(m, tokens, x, ex) : Vec{};  // [T, L, P]

  // This step's K/V per owning layer [T, kvh, hd]. The cache is only read during the step and
  // written at the end, so a KV-shared layer sees exactly what its source layer saw, and a chunk
  // longer than the ring never overwrites keys its own earlier rows still need.
  std::vector<Vec> step_k(static_cast<size_t>(L)), step_v(static_cast<size_t>(L));
  // Attention outputs [T, nH, hd], one buffer for every layer (sized for the widest head): each
  // layer's attention writes all of its T·nH·hd values before attention_output reads them.
  int64_t widest = 0;
  for (const LayerPlan& p : c.layers) widest = std::max<int64_t>(widest, p.head_dim);
  Vec a(static_cast<size_t>(T * nH * widest));
  Vec q_storage;
  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    const int64_t hd = p.head_dim, kvh = p.kv_heads;
    const bool sliding = p.type == LayerType::Sliding;
    blocks::Qkv qkv = blocks::project_qkv(m, int(i), x, positions, rope, ex, std::move(q_storage));
    if (!p.kv_shared) {
      step_k[size_t(i)] = std::move(qkv.k);
      step_v[size_t(i)] = std::move(qkv.v);
    }
    const int src = p.kv_source_layer;
    const Vec& sk = step_k[size_t(src)];
    const Vec& sv = step_v[size_t(src)];
    {
      ScopeTimer timer(ex.times ? &ex.times->attention_s : nullptr);
      if (ex.matmul)  // SIMD kernels on the pool
        attend_layer_simd(kv, src, sliding, W, nH, kvh, hd, groups, positions, qkv.q, sk, sv, a, ex);
      else  // the reference loops
        attend_layer_reference(kv, src, sliding, W, nH, kvh, hd, groups, positions, qkv.q, sk, sv, a);
    }
    q_storage = std::move(qkv.q);  // the next layer's q reuses it
    blocks::attention_output(m, int(i), a, x, ex);
    blocks::feed_forward(m, int(i), x, ex);
    blocks::per_layer_tail(m, int(i), x, ple, ex);
  }

  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    if (p.kv_shared) continue;
    const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
    for (const Group& g : groups)
      kv.write(int(i), g.seq, g.pos_begin, int64_t(g.row_end - g.row_begin), &step_k[size_t(i)][g.row_begin * size_t(row_w)],
               &step_v[size_t(i)][g.row_begin * size_t(row_w)]);
  }
  for (const Group& g : groups) kv.commit(g.seq, g.pos_begin + int64_t(g.row_end - g.row_begin));

  // Logits only for the rows that asked (the last prompt row, decode rows).
  const int64_t H = c.hidden_size;
  Vec wanted;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].want_logits) wanted.insert(wanted.end(), x.begin() + ptrdiff_t(r * H), x.begin() + ptrdiff_t((r + 1) * H));
  if (wanted.empty()) return;
  blocks::logits_into(m, std::move(wanted), ex, logits);
}

}  // namespace g4
