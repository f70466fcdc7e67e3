// g4 bench's report: the figures derived from the runs, printed as a table on stdout and, with
// --json FILE, written as one JSON object with the device, the dtype policy and the kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench_optional_runs.h"
#include "cli/bench_rig.h"
#include "cli/bench_runs.h"
#include "cli/bench_stats.h"

namespace g4::cli {

struct BenchResults {
  PrefillRuns prefill;
  DecodeRuns decode;
  OptionalRuns optional;
  EngineRss rss;
};

struct BenchFigures {
  uint64_t bytes_per_token = 0;  // weight bytes one decoded token reads
  double roofline_tok_s = 0;     // the best bandwidth / bytes_per_token
  double depth0_tok_s = 0, depth_tok_s = 0;  // decode medians (depth: 0 without --depth)
  double warm_prefill_tok_s = 0;             // at the median warm prefill
  std::vector<double> warm_runs_tok_s;       // per warm prefill
  std::vector<double> depth_percent;     // each depth run / the depth-0 run before it
  std::vector<double> roofline_percent;  // each depth-0 run / (bandwidth just before it / bytes)
  std::vector<double> pass_percent;      // each depth-0 run / the read pass just before it
  double pass_percent_median = 0;
  std::vector<double> depth_pass_percent;  // each depth run / the read pass of its depth just before it
  double depth_pass_percent_median = 0;
  // The paired steps' percents (DecodeRuns::depth0_pairs, depth_pairs): median, quartiles, extremes.
  Spread paired, depth_paired;
  double prefill_macs = 0;         // the weight products' multiply-adds per prompt token
  double prefill_gops = 0;         // those at the warm median
  TokenTimes prefill_median{};     // the warm prefill whose total is the median
  double products_alone_gops = 0;  // the products timed alone in that run
  std::string executed;            // the weight products' kernel, in words
  std::string attention;           // attention's kernel for the cache's dtype, in words
};

BenchFigures derive_figures(const BenchRig& rig, const BenchResults& res);

void print_bench_table(const BenchRig& rig, const BenchResults& res, const BenchFigures& fig);

// `weights_flag`: --weights as given ("" without it).
void write_bench_json(const std::string& path, const std::string& weights_flag, const BenchRig& rig,
                      const BenchResults& res, const BenchFigures& fig);

}  // namespace g4::cli
