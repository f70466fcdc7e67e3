#include "model/cached_attention.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "ops/amx/attention_bf16_tiles.h"
#include "ops/attention/attention_bf16.h"
#include "ops/attention/attention_int8.h"
#include "ops/attention/attention_kernels.h"
#include "ops/ref/reference_ops.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/quantize_int8.h"
#include "platform/scope_timer.h"
#include "platform/thread_pool.h"

namespace g4 {

namespace {

using blocks::Vec;

// The shape of one layer's attention and where the keys of a row at `pos` start and end.
struct LayerShape {
  bool sliding;
  int64_t W, nH, kvh, hd;
  const std::vector<int64_t>* key_ends;  // [T] or empty: see attend_from_cache
  // The first key a row at `pos` sees, never before `floor`: q - k < W on sliding layers.
  int64_t first_key(int64_t pos, int64_t floor) const { return sliding ? std::max<int64_t>(floor, pos - W + 1) : 0; }
  // The last key row r (at `pos`) sees: itself, or on a sliding layer the end of its image.
  int64_t last_key(size_t r, int64_t pos) const { return sliding && !key_ends->empty() ? (*key_ends)[r] : pos; }
};

LayerShape layer_shape(const Model& m, int layer, const std::vector<int64_t>& key_ends) {
  const LayerPlan& p = m.config.layers[size_t(layer)];
  return {p.type == LayerType::Sliding, m.config.sliding_window, m.config.num_attention_heads, p.kv_heads, p.head_dim,
          &key_ends};
}

// The reference path: gathers every key to f32 (KvStore::read) and runs ref::attend_row.
void attend_reference(const KvStore& kv, int src, const LayerShape& s, const std::vector<RowGroup>& groups,
                      const std::vector<int64_t>& positions, const Vec& q, const Vec& sk, const Vec& sv, Vec& a) {
  const int64_t row_w = s.kvh * s.hd;
  Vec keys, values;  // [cached + step rows, kvh, hd]
  for (const RowGroup& g : groups) {
    const int64_t n_step = int64_t(g.row_end - g.row_begin);
    const int64_t first_cached = s.first_key(g.pos_begin, 0);
    const int64_t n_cached = g.pos_begin - first_cached;
    keys.resize(size_t((n_cached + n_step) * row_w));
    values.resize(keys.size());
    if (n_cached > 0) kv.read(src, g.seq, first_cached, g.pos_begin, keys.data(), values.data());
    std::copy(sk.begin() + ptrdiff_t(g.row_begin * row_w), sk.begin() + ptrdiff_t(g.row_end * row_w),
              keys.begin() + ptrdiff_t(n_cached * row_w));
    std::copy(sv.begin() + ptrdiff_t(g.row_begin * row_w), sv.begin() + ptrdiff_t(g.row_end * row_w),
              values.begin() + ptrdiff_t(n_cached * row_w));
    for (size_t r = g.row_begin; r < g.row_end; ++r) {
      const int64_t pos = positions[r], off = s.first_key(pos, first_cached) - first_cached;
      ref::attend_row(&q[r * size_t(s.nH * s.hd)], &keys[size_t(off * row_w)], &values[size_t(off * row_w)],
                      s.last_key(r, pos) - first_cached - off + 1, s.nH, s.kvh, s.hd, &a[r * size_t(s.nH * s.hd)]);
    }
  }
}

// The bf16 attention kernel runs under compute = bf16 over a store whose views hold bf16, on
// AMX-BF16 tiles or where the plan prefers VDPBF16PS to widening the K/V for FMA.
bool bf16_attention_for(std::optional<ops::KvElem> elem, const blocks::Exec& ex) {
  return ex.matmul && ex.matmul->bf16_compute && elem == ops::KvElem::BF16 && ops::attention_bf16_available() &&
         (ex.matmul->attention_bf16_dots || ex.matmul->attention_tiles != ops::Bf16Tiles::None);
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

// This step's own K/V rows ([T, kvh, hd]) in the element type the store keeps (f32 for a store
// without views), rounded exactly as it will store them (as KvRows::write). A row then sees the
// same keys whether an earlier row of its sequence came in this step or a past one, on every
// kernel: chunking and batching change no bit.
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

StepRows round_step_rows(std::optional<ops::KvElem> elem, const Vec& sk, const Vec& sv, int64_t hd) {
  StepRows r;
  r.elem = elem.value_or(ops::KvElem::F32);
  r.kf = sk.data();
  r.vf = sv.data();
  if (r.elem == ops::KvElem::BF16 || r.elem == ops::KvElem::F16) {
    uint16_t (*round)(float) = r.elem == ops::KvElem::BF16 ? f32_to_bf16 : f32_to_f16;
    r.kh.resize(sk.size());
    r.vh.resize(sv.size());
    for (size_t i = 0; i < sk.size(); ++i) r.kh[i] = round(sk[i]);
    for (size_t i = 0; i < sv.size(); ++i) r.vh[i] = round(sv[i]);
  } else if (r.elem == ops::KvElem::I8) {
    r.kq.resize(sk.size());
    r.vq.resize(sv.size());
    r.ks.resize(sk.size() / size_t(hd));
    r.vs.resize(r.ks.size());
    for (size_t row = 0; row < r.ks.size(); ++row) {
      r.ks[row] = quantize_int8_symmetric(&sk[row * size_t(hd)], hd, &r.kq[row * size_t(hd)]);
      r.vs[row] = quantize_int8_symmetric(&sv[row * size_t(hd)], hd, &r.vq[row * size_t(hd)]);
    }
  }
  return r;
}

// Each group's keys as spans: the cached positions (views into the store in its element type,
// or gathered to f32 where it has none), then the step's rows of that group.
struct GroupSpans {
  std::vector<ops::KvSpan> spans;
  std::vector<size_t> begin;          // group gi's spans are [begin[gi], begin[gi + 1])
  std::vector<int64_t> first_cached;  // per group, the first cached position it reads
  std::vector<Vec> gathered;          // f32 copies, only for a store without views
};

void collect_spans(const KvStore& kv, int src, const LayerShape& s, const std::vector<RowGroup>& groups,
                   const StepRows& step, bool views_promised, GroupSpans& out) {
  out.begin.resize(groups.size() + 1);
  out.first_cached.resize(groups.size());
  out.gathered.reserve(2 * groups.size());  // no reallocation: spans point into these
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const RowGroup& g = groups[gi];
    out.begin[gi] = out.spans.size();
    const int64_t first = out.first_cached[gi] = s.first_key(g.pos_begin, 0);
    const int64_t n_cached = g.pos_begin - first;
    if (n_cached > 0 && !kv.view(src, g.seq, first, g.pos_begin, out.spans)) {
      if (views_promised) throw Error("KV store: view_element() promised bf16 or int8 views, but view() gave none");
      Vec& k = out.gathered.emplace_back(size_t(n_cached * s.kvh * s.hd));
      Vec& v = out.gathered.emplace_back(size_t(n_cached * s.kvh * s.hd));
      kv.read(src, g.seq, first, g.pos_begin, k.data(), v.data());
      out.spans.push_back({ops::KvElem::F32, n_cached, k.data(), v.data(), nullptr, nullptr});
    }
    out.spans.push_back(step.span(g.row_begin, int64_t(g.row_end - g.row_begin), s.kvh, s.hd));
  }
  out.begin[groups.size()] = out.spans.size();
}

// One work item: keys [begin, end) of one (row, kv head), within its group's spans.
struct AttnItem {
  size_t row;
  int64_t kh, begin, end;
  size_t group;
  int n_split;  // slices of this (row, kv head); the first one carries the merged result
};

// Items of fixed slices of `slice` keys from each row's first key, merged in order: the same
// arithmetic whatever the batch, the chunking or the number of threads. Also counts the
// multiply-adds (q·k and p·v) into *fmas.
std::vector<AttnItem> work_items(const LayerShape& s, const std::vector<RowGroup>& groups, const GroupSpans& gs,
                                 const std::vector<int64_t>& positions, int64_t slice, int64_t* fmas) {
  std::vector<AttnItem> items;
  *fmas = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t r = groups[gi].row_begin; r < groups[gi].row_end; ++r) {
      const int64_t pos = positions[r], base = gs.first_cached[gi];
      const int64_t begin = s.first_key(pos, base) - base, end = s.last_key(r, pos) - base + 1;
      *fmas += 2 * (end - begin) * s.nH * s.hd;
      const int n_slices = int((end - begin + slice - 1) / slice);
      for (int64_t kh = 0; kh < s.kvh; ++kh)
        for (int64_t b = begin; b < end; b += slice)
          items.push_back({r, kh, b, std::min(end, b + slice), gi, b == begin ? n_slices : 0});
    }
  return items;
}

// Softmax states of n items (o [G, hd], m [G], l [G] each), every one written whole before it is
// read, so never cleared. Up to 16 MiB (decode, short prefill) they live in one buffer kept per
// thread across layers and steps; a larger step's are its own.
class StateBuffer {
 public:
  explicit StateBuffer(size_t floats) {
    constexpr size_t kReusedStateFloats = size_t(1) << 22;
    thread_local std::vector<float> reused;
    if (floats <= kReusedStateFloats) {
      if (reused.size() < floats) reused.resize(floats);
      data_ = reused.data();
    } else {
      fresh_.reset(new float[floats]);
      data_ = fresh_.get();
    }
  }
  float* data() const { return data_; }

 private:
  std::unique_ptr<float[]> fresh_;
  float* data_;
};

// fn(i) for every item on the pool: each thread claims the next unclaimed item until none are
// left, so a thread the host slowed does not hold the others up. Which thread runs an item
// changes no bit of it.
void run_items(ThreadPool* pool, bool parallel, size_t n, const std::function<void(size_t)>& fn) {
  if (!parallel || n < 2) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const int64_t nt = std::min<int64_t>(pool->size(), int64_t(n));
  std::atomic<size_t> next{0};
  pool->parallel_for(nt, [&](int64_t, int64_t, int) {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < n; i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i);
  });
}

// The SIMD kernels over the store's own element type: work items of (row, kv head, key slice)
// on the pool, their softmax states merged in key order afterwards.
void attend_simd(const KvStore& kv, int src, const LayerShape& s, const std::vector<RowGroup>& groups,
                 const std::vector<int64_t>& positions, const Vec& q, const Vec& sk, const Vec& sv, Vec& a,
                 const blocks::Exec& ex) {
  const int64_t G = s.nH / s.kvh, hd = s.hd, qw = s.nH * hd;
  const bool bf16 = uses_bf16_attention(kv, ex), int8 = uses_int8_attention(kv, ex);
  const ops::Bf16Tiles tiles = attention_tiles_for(kv.view_element(), ex, G, hd);
  const StepRows step = round_step_rows(kv.view_element(), sk, sv, hd);
  GroupSpans gs;
  collect_spans(kv, src, s, groups, step, bf16 || int8, gs);
  int64_t fmas = 0;
  const std::vector<AttnItem> items =
      work_items(s, groups, gs, positions, std::max<int64_t>(1, ex.attention_slice), &fmas);
  const size_t state = size_t(G * hd + 2 * G);  // o [G, hd], m [G], l [G]
  const StateBuffer states(items.size() * state);
  ThreadPool* pool = ex.matmul->pool;
  const bool parallel = pool && pool->size() > 1 && fmas >= ex.attention_parallel_min_fmas;
  run_items(pool, parallel, items.size(), [&](size_t i) {
    const AttnItem& it = items[i];
    const ops::KvSpans ks{&gs.spans[gs.begin[it.group]], gs.begin[it.group + 1] - gs.begin[it.group], s.kvh, hd};
    float* o = states.data() + i * state;
    float *mx = o + G * hd, *l = mx + G;
    const float* qr = &q[it.row * size_t(qw) + size_t(it.kh * G * hd)];
    if (tiles != ops::Bf16Tiles::None) ops::attend_partial_bf16_tiles(tiles, qr, G, ks, it.kh, it.begin, it.end, o, mx, l);
    else if (bf16) ops::attend_partial_bf16(qr, G, ks, it.kh, it.begin, it.end, o, mx, l);
    else if (int8) ops::attend_partial_int8(qr, G, ks, it.kh, it.begin, it.end, o, mx, l);
    else ops::attend_partial(qr, G, ks, it.kh, it.begin, it.end, o, mx, l);
    if (it.n_split == 1) ops::attend_finish(G, hd, o, l, &a[it.row * size_t(qw) + size_t(it.kh * G * hd)]);
  });
  for (size_t i = 0; i < items.size(); ++i) {
    const AttnItem& it = items[i];
    if (it.n_split > 1)  // the item's slices are items [i, i + n_split), in key order
      ops::attend_merge_finish(G, hd, states.data() + i * state, state, it.n_split,
                               &a[it.row * size_t(qw) + size_t(it.kh * G * hd)]);
  }
}

}  // namespace

void attend_from_cache(const Model& m, int layer, const KvStore& kv, const std::vector<RowGroup>& groups,
                       const std::vector<int64_t>& positions, const std::vector<int64_t>& sliding_key_ends,
                       const Vec& q, const Vec& k, const Vec& v, Vec& a, const blocks::Exec& ex) {
  ScopeTimer timer(ex.times ? &ex.times->attention_s : nullptr);
  const LayerShape s = layer_shape(m, layer, sliding_key_ends);
  const int src = m.config.layers[size_t(layer)].kv_source_layer;
  if (ex.simd()) attend_simd(kv, src, s, groups, positions, q, k, v, a, ex);
  else attend_reference(kv, src, s, groups, positions, q, k, v, a);
}

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
  std::string d = std::string(stored) + " K/V widened to f32, f32 queries, FMA (SIMD), f32 softmax";
  if (elem == ops::KvElem::BF16 && ex.matmul->bf16_compute && ops::attention_bf16_available() &&
      !ex.matmul->attention_bf16_dots)
    d += "; not VDPBF16PS, which this CPU issues slower than FMA (ops::plan_attention)";
  return d;
}

}  // namespace g4
