// g4 bench's decode runs: depth 0 and --depth alternate run by run, so that the host's load,
// drifting over minutes, moves both medians alike instead of their ratio. Each depth-0 run is
// paired with a bandwidth measurement and a weight read pass just before it, each depth run with
// a read pass of the weights and of the cache it attends over: a run against the ceiling of its
// own moment says how close the kernels come, whatever the host's drift.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/bench_runs.h"
#include "cli/bench_stats.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/weights.h"
#include "ops/rows/row_reductions.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

// The read-pass roofline: the bytes a token streams, read the way decode reads them (the same
// memory, pool, per-matrix hand-offs and streams per thread), nothing computed. The best of at
// least one round of ops::read_pass_ways and 40 ms of passes (a small model's pass is short and noisy):
// a ceiling, so the ratio errs low, never high.
double best_read_pass(BenchRig& r, const std::vector<ReadRange>& reads, uint64_t* pass_bytes) {
  const std::vector<ops::ReadPassWay> ways = ops::read_pass_ways(r.mm.decode);
  double best = 1e30, spent = 0;
  for (size_t k = 0; k < std::max<size_t>(3, ways.size()) || spent < 0.04; ++k) {
    const ops::ReadPassWay& way = ways[k % ways.size()];
    const double s = time_read_pass(reads, *r.pool, way.streams, way.prefetch_bytes, pass_bytes);
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

// What the next token of `seq` reads of the cache: on each layer that owns K/V, the positions
// it attends besides its own (the last sliding_window - 1 on sliding layers, all on full ones),
// K and V (and int8's per-row scales), as the spans attention reads them. KV-shared layers read
// their source's spans again; they count once here, the least a token must read.
std::vector<ReadRange> kv_reads(const KvCache& kv, KvDType dtype, const ModelConfig& c, int seq) {
  const int64_t length = kv.length(seq);
  std::vector<ReadRange> out;
  std::vector<ops::KvSpan> spans;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerPlan& p = c.layers[i];
    if (p.kv_shared) continue;
    const int64_t begin = p.type == LayerType::Sliding ? std::max<int64_t>(0, length - (c.sliding_window - 1)) : 0;
    if (begin >= length) continue;
    spans.clear();
    if (!kv.view(int(i), seq, begin, length, spans))
      throw Error("g4 bench: the KV cache gives no spans for layer " + std::to_string(i) + ": no read pass at depth");
    // A row's bytes as the cache stores it; int8 keeps its per-head scales apart from the values.
    const uint64_t row = kv_row_bytes(dtype, p.kv_heads, p.head_dim);
    const uint64_t scales = dtype == KvDType::Int8 ? 4 * uint64_t(p.kv_heads) : 0;
    for (const ops::KvSpan& sp : spans) {
      const uint64_t n = uint64_t(sp.n);
      out.push_back({static_cast<const std::byte*>(sp.k), n * (row - scales)});
      if (sp.v != sp.k) out.push_back({static_cast<const std::byte*>(sp.v), n * (row - scales)});
      if (scales) {
        out.push_back({reinterpret_cast<const std::byte*>(sp.k_scale), n * scales});
        out.push_back({reinterpret_cast<const std::byte*>(sp.v_scale), n * scales});
      }
    }
  }
  return out;
}

// Decodes --gen tokens with the cache already `start_depth` long; returns tok/s. With `depth_pass`,
// first times the read pass of that depth: the weights' ranges, then the cache's (kv_reads).
double time_decode(BenchRig& r, int64_t start_depth, std::vector<TokenTimes>& times,
                   const std::vector<ReadRange>* weight_reads = nullptr, double* depth_pass = nullptr,
                   uint64_t* depth_pass_bytes = nullptr) {
  KvCache& kv = *r.kv;
  const int64_t gen = r.flags.gen;
  const int seq = kv.add_sequence();
  if (start_depth > 0) kv.fill_for_benchmark(seq, start_depth, 42);
  if (depth_pass) {
    std::vector<ReadRange> reads = *weight_reads;
    for (const ReadRange& k : kv_reads(kv, r.kv_options.dtype, r.model->config, seq)) reads.push_back(k);
    *depth_pass = best_read_pass(r, reads, depth_pass_bytes);
  }
  int tok = 5;
  std::vector<float> logits;  // kept across tokens, as the engine keeps it
  blocks::StepTimes st;
  blocks::Exec timed = r.ex;
  timed.times = &st;
  auto t = BenchClock::now();
  for (int64_t g = 0; g < gen; ++g) {
    forward_cached(*r.model, {{seq, kv.length(seq), tok, true}}, kv, timed, logits);
    tok = int(ops::argmax(logits.data(), int64_t(logits.size())));  // greedy, as the sampler
  }
  const double s = seconds_since(t);
  kv.free_sequence(seq);
  const double per = 1e3 / double(gen);
  times.push_back({s * per, st.weight_products_s * per, st.attention_s * per});
  return double(gen) / s;
}

// --gen tokens decoded one at a time from `start_depth`, each right after one pass of every read
// way over what that token reads: the weights, then the cache's spans as they stand (kv_reads).
// A pass and its token lie tens of milliseconds apart, so the host's drift moves both alike.
std::vector<PairedStep> paired_steps(BenchRig& r, int64_t start_depth, const std::vector<ReadRange>& weight_reads) {
  KvCache& kv = *r.kv;
  const int seq = kv.add_sequence();
  if (start_depth > 0) kv.fill_for_benchmark(seq, start_depth, 42);
  const std::vector<ops::ReadPassWay> ways = ops::read_pass_ways(r.mm.decode);
  std::vector<PairedStep> pairs;
  std::vector<float> logits;
  int tok = 5;
  for (int64_t g = 0; g < r.flags.gen; ++g) {
    std::vector<ReadRange> reads = weight_reads;
    for (const ReadRange& k : kv_reads(kv, r.kv_options.dtype, r.model->config, seq)) reads.push_back(k);
    double pass = 1e30;
    for (const ops::ReadPassWay& way : ways)
      pass = std::min(pass, time_read_pass(reads, *r.pool, way.streams, way.prefetch_bytes));
    const auto t = BenchClock::now();
    forward_cached(*r.model, {{seq, kv.length(seq), tok, true}}, kv, r.ex, logits);
    tok = int(ops::argmax(logits.data(), int64_t(logits.size())));
    pairs.push_back({pass, seconds_since(t)});
  }
  kv.free_sequence(seq);
  return pairs;
}

}  // namespace

DecodeRuns run_decodes(BenchRig& r, EngineRss& rss) {
  const BenchFlags& f = r.flags;
  DecodeRuns d;
  BandwidthOptions one_pass_each = r.bandwidth;
  one_pass_each.repetitions = 3;  // one pass of each way to read
  const std::vector<ReadRange> reads = decode_weight_reads(r.model->weights, r.model->config);
  (void)best_read_pass(r, reads, &d.pass_bytes);  // first touch of anything not yet read
  for (int64_t i = 0; i < f.repeat; ++i) {
    d.bandwidth_gb_s.push_back(measure_read_bandwidth(one_pass_each).best_gb_per_s);
    d.pass_s.push_back(best_read_pass(r, reads, &d.pass_bytes));
    d.depth0_tok_s.push_back(time_decode(r, 0, d.depth0_times));
    rss.sample();
    std::fprintf(stderr, "[bench] decode at depth 0, run %lld: %.2f tok/s\n", (long long)i + 1, d.depth0_tok_s.back());
    if (f.depth == 0) continue;
    d.depth_pass_s.push_back(0.0);
    d.depth_tok_s.push_back(time_decode(r, f.depth, d.depth_times, &reads, &d.depth_pass_s.back(), &d.depth_pass_bytes));
    rss.sample();
    std::fprintf(stderr, "[bench] decode at depth %lld, run %lld: %.2f tok/s\n", (long long)f.depth, (long long)i + 1,
                 d.depth_tok_s.back());
  }
  std::fprintf(stderr, "[bench] measuring memory-read bandwidth with %d threads ...\n", f.threads);
  // The best of the measurements before the run, before each depth-0 run and after: a
  // neighbour's burst lowers some of them, and the highest ceiling is the conservative divisor.
  d.bandwidth = measure_read_bandwidth(r.bandwidth);
  if (r.bw_before.best_gb_per_s > d.bandwidth.best_gb_per_s) d.bandwidth = r.bw_before;
  for (double b : d.bandwidth_gb_s) d.bandwidth.best_gb_per_s = std::max(d.bandwidth.best_gb_per_s, b);
  std::fprintf(stderr, "[bench] paired steps: %lld tokens each after its own read pass ...\n", (long long)f.gen);
  d.depth0_pairs = paired_steps(r, 0, reads);
  if (f.depth > 0) d.depth_pairs = paired_steps(r, f.depth, reads);
  return d;
}

}  // namespace g4::cli
