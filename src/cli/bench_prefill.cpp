// g4 bench's prefills: the whole prompt in one forward pass, its first token chosen.
#include <algorithm>
#include <cstdio>

#include "cli/bench_runs.h"
#include "cli/bench_stats.h"
#include "model/forward_cached.h"
#include "ops/rows/row_reductions.h"

namespace g4::cli {
namespace {

// One prefill of the prompt on a fresh sequence; returns its seconds (the time to first token).
double time_prefill(BenchRig& r, std::vector<TokenTimes>* times) {
  KvCache& kv = *r.kv;
  const int64_t prompt_len = r.flags.prompt_len;
  const int seq = kv.add_sequence();
  blocks::StepTimes st;
  blocks::Exec timed = r.ex;
  timed.times = &st;
  auto t = BenchClock::now();
  std::vector<BatchRow> rows;
  for (int64_t p = 0; p < prompt_len; ++p) rows.push_back({seq, p, r.prompt[size_t(p)], p + 1 == prompt_len});
  auto logits = forward_cached(*r.model, rows, kv, timed);
  (void)ops::argmax(logits.data(), int64_t(logits.size()));  // the first token is chosen here
  const double s = seconds_since(t);
  if (times) times->push_back({s * 1e3, st.weight_products_s * 1e3, st.attention_s * 1e3});
  kv.free_sequence(seq);
  return s;
}

}  // namespace

TokenTimes median_run(std::vector<TokenTimes> ts) {
  std::sort(ts.begin(), ts.end(), [](const TokenTimes& x, const TokenTimes& y) { return x.total_ms < y.total_ms; });
  return ts[(ts.size() - 1) / 2];
}

void EngineRss::sample() { bytes = std::max(bytes, rss_now_bytes()); }

PrefillRuns run_prefills(BenchRig& r, EngineRss& rss) {
  const BenchFlags& f = r.flags;
  PrefillRuns p;
  std::fprintf(stderr, "[bench] cold prefill of %lld tokens ...\n", (long long)f.prompt_len);
  rss.bytes = rss_now_bytes();
  p.cold_s = time_prefill(r, nullptr);
  rss.sample();
  for (int64_t i = 0; i < f.repeat; ++i) {
    p.warm_s.push_back(time_prefill(r, &p.warm_times));
    rss.sample();
    std::fprintf(stderr, "[bench] warm prefill %lld/%lld: %.1f tok/s\n", (long long)i + 1, (long long)f.repeat,
                 double(f.prompt_len) / p.warm_s.back());
  }
  // The peak again, right after the prefills it is held against: a neighbour's burst lowers one
  // measurement, and the higher of the two is the conservative divisor, as with the bandwidth.
  std::fprintf(stderr, "[bench] measuring the %s peak on %d threads again ...\n", mac_unit_name(r.unit), f.threads);
  p.peak_before = r.peak.gops;
  p.peak_after = measure_mac_peak(r.unit, f.threads).gops;
  r.peak.gops = std::max(p.peak_before, p.peak_after);
  return p;
}

}  // namespace g4::cli
