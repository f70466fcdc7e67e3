// `--weights q8|q4` as `g4 bench` and `g4 generate` run it: re-encode the weight matrices at load
// and report what that cost in time and in logits. Before re-encoding, a short fixed probe
// (engine/logit_probe.h) runs on the checkpoint's own weights with f32 compute (the SIMD path,
// f32 activations: the closest fast path to the reference); once the re-encoded weights are
// placed and prepared as the run will use them, the same probe runs on the run's own path, and
// the two logit sets are compared.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "engine/logit_probe.h"
#include "model/executor.h"
#include "model/model.h"
#include "model/requantize.h"
#include "ops/matmul/matmul.h"
#include "platform/thread_pool.h"

namespace g4::cli {

// Tokens in the probe: every row's logits are compared, and the reads of the weights (once per
// pass) dominate its time, so a few more rows cost little.
inline constexpr int64_t kLogitProbeTokens = 8;

struct WeightsAtLoad {
  std::string flag;              // "q8" or "q4"
  RequantizeReport requantized;  // the re-encoding itself (its seconds exclude the probes)
  std::vector<int> probe;        // the probe's tokens
  std::vector<float> before;     // [probe, V] on the checkpoint's weights, f32 compute
  LogitShift shift;              // set by finish_weights_at_load
  std::string after_path;        // what the second probe ran on, in words
  double probe_s = 0;            // both probes together
};

// Without --weights: nullopt, nothing done. Else the first probe, then the re-encoding (stderr
// says what it did, tagged `tag`, e.g. "[bench]"; nothing when `tag` is null, as for g4 serve,
// whose log lines are JSON: it reports the result in its startup line).
std::optional<WeightsAtLoad> start_weights_at_load(const Args& a, Model& m, ThreadPool& pool, const char* tag);

// After placement and preparation: the probe on the run's path (`run`; its matmul null, i.e. the
// reference loops, takes the f32 SIMD path instead: the loops would take minutes on a real
// model and compute the same f32 products), compared with the first; prints the result to stderr
// unless `tag` is null.
void finish_weights_at_load(WeightsAtLoad& w, const Model& m, ThreadPool& pool, const blocks::Exec& run, const char* tag);

}  // namespace g4::cli
