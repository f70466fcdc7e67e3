// g4 bench's timed runs on the rig: the prefills (cold, then --repeat warm ones) and the decode
// runs at depth 0 and at --depth, each depth-0 run paired with a bandwidth measurement and a
// weight read pass just before it.
#pragma once
#include <cstdint>
#include <vector>

#include "cli/bench_rig.h"
#include "platform/bandwidth.h"

namespace g4::cli {

// Where a decoded token's (or a whole prefill's) time goes, one run: ms in total, in the weight
// products, in attention, and the rest (norms, RoPE, activations, cache writes, sampling).
struct TokenTimes {
  double total_ms, weight_products_ms, attention_ms;
  double rest_ms() const { return total_ms - weight_products_ms - attention_ms; }
};

// The run whose total is the median (the lower of the middle two for an even count), so that its
// parts add up to the figure printed.
TokenTimes median_run(std::vector<TokenTimes> ts);

// A prefill's seconds are also its time to first token: the first token is chosen inside.
struct PrefillRuns {
  double cold_s = 0;
  std::vector<double> warm_s;          // per warm run
  std::vector<TokenTimes> warm_times;  // per warm run
  double peak_before = 0, peak_after = 0;   // GOP/s of rig.unit before and after the prefills
};

// The engine's resident size, sampled where the bench holds no buffer of its own: after the
// load, after each prefill and after each decode run (the most of them).
struct EngineRss {
  uint64_t bytes = 0;
  void sample();
};

// The cold prefill, the warm ones, then the peak again: rig.peak becomes the higher of the two.
PrefillRuns run_prefills(BenchRig& rig, EngineRss& rss);

// One decoded token right after a read pass of what it reads (every read way once, the best).
struct PairedStep {
  double pass_s, token_s;
  double percent() const { return 100.0 * pass_s / token_s; }
};

struct DecodeRuns {
  std::vector<double> depth0_tok_s, depth_tok_s;  // per run; depth runs only with --depth > 0
  std::vector<TokenTimes> depth0_times, depth_times;
  std::vector<double> bandwidth_gb_s;  // measured just before each depth-0 run
  std::vector<double> pass_s;          // the read pass just before each depth-0 run
  uint64_t pass_bytes = 0;             // what one read pass reads
  std::vector<double> depth_pass_s;    // the read pass of weights + cache just before each depth run
  uint64_t depth_pass_bytes = 0;       // what one of those reads
  BandwidthResult bandwidth;           // the best of every measurement: before, during and after
  // After the runs, --gen tokens from depth 0 and (with --depth) from that depth, each paired with
  // its own pass: a run's tokens span seconds of the host's drift, a pair tens of milliseconds.
  std::vector<PairedStep> depth0_pairs, depth_pairs;
};

// --repeat rounds of: bandwidth, read pass, decode at depth 0, read pass at depth, decode at
// depth; then the bandwidth again, then the paired steps at depth 0 and at depth.
DecodeRuns run_decodes(BenchRig& rig, EngineRss& rss);

}  // namespace g4::cli
