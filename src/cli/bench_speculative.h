// g4 bench --speculative M: what speculative decoding buys on this machine, measured in one run.
//  - the verify step's cost: one sequence's step of 1 + k rows (k = 1..8) against one row, at
//    --prompt-len tokens of context;
//  - tokens/s through the engine, round by round: plain decoding, the chosen mode, a replay
//    drafter proposing the sequence's own greedy continuation (every draft accepted: the
//    machinery's ceiling, independent of any drafter's quality), and a random drafter (nothing
//    accepted: what speculation costs when it never pays), each with its acceptance per position.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli/bench_rig.h"
#include "engine/engine.h"

namespace g4::cli {

struct VerifyCost {
  int k = 0;
  double step_ms = 0;  // median over the runs
};

struct SpecDecodeRounds {
  std::string name;              // "plain", "ngram", "replay (ceiling)", "random (nothing accepted)"
  std::vector<double> tok_s;     // per round
  std::vector<double> vs_plain;  // per round: tok_s / that round's plain tok_s
  SpeculationStats stats;        // summed over the rounds
};

struct SpecBench {
  SpecMode mode = SpecMode::Off;
  int k_max = 0;
  int64_t context = 0;             // tokens in the cache when the verify steps were timed
  std::vector<VerifyCost> verify;  // k = 0 (one row) .. 8
  std::vector<SpecDecodeRounds> decode;
};

SpecBench bench_speculative(BenchRig& rig, const EngineOptions& engine, SpecMode mode, int k_max);
void print_spec_bench(const SpecBench& b);
nlohmann::json spec_bench_json(const SpecBench& b);

}  // namespace g4::cli
