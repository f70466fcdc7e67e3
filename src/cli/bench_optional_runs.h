// The runs g4 bench adds on request, after the prefills and decodes: decoding under an output
// grammar (--json-schema, --json-object, --grammar), several streams decoding together through
// the engine (--streams LIST), a chat replayed turn by turn (--chat-turns N) and the vision
// tower on images (--image FILE, --image-size WxH).
#pragma once
#include <optional>
#include <vector>

#include "cli/args.h"
#include "cli/bench_engine.h"
#include "cli/bench_grammar.h"
#include "cli/bench_rig.h"
#include "cli/bench_speculative.h"
#include "cli/bench_vision.h"

namespace g4::cli {

// One --streams count over --repeat rounds: each round runs every count once, in the order given,
// and takes each count's gain over one stream within the round (the host as it was for both).
struct StreamsRounds {
  int streams = 0;
  std::vector<StreamsResult> rounds;
  std::vector<double> gains;  // per round: aggregate / that round's 1-stream aggregate (empty without 1 in the list)
};

struct OptionalRuns {
  std::optional<GrammarMaskCost> masks;
  std::vector<StreamsRounds> streams;  // one per --streams count, in the order given
  std::vector<ChatTurn> turns_cached, turns_cold;  // with the prefix cache and without
  std::optional<SpecBench> speculative;            // --speculative ngram|draft
  std::optional<VisionBench> vision;               // --image FILE / --image-size WxH
};

// Runs what the flags ask for, in that order; throws g4::Error naming a flag whose value is out of
// range (only when that run is reached, as the rest of the bench has already run).
OptionalRuns run_optional(const Args& a, bool grammar_run, BenchRig& rig);

}  // namespace g4::cli
