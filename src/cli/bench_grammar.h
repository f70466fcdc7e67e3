// g4 bench --json-schema FILE: what a grammar's token masks cost per decoded token, held against
// the decode step they sit beside. Decodes on the bench's own cache with the grammar applied
// (sampling at temperature 1, so the walk visits strings, numbers, keys and enums), restarting
// the matcher whenever a sentence of the grammar is complete. The first sentence runs on a freshly
// compiled grammar (every context is new: "cold"); later ones reuse its cached masks ("warm").
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/grammar_matcher.h"
#include "engine/kv_cache.h"
#include "model/executor.h"
#include "model/model.h"

namespace g4::cli {

// Per token, a grammar costs the matcher (mask, then advance by the chosen token) plus what
// applying the mask adds to sampling; sampling itself is part of any decode step. Both samplers
// (masked and plain) run on every step's logits, so the difference is measured on the same data.
struct GrammarMaskCost {
  int64_t tokens = 0;       // decode steps measured
  int sentences = 0;        // complete sentences of the grammar among them
  int64_t cold_tokens = 0;  // steps of the first sentence (fresh grammar)
  double cold_matcher_ms = 0;  // mean matcher time per token there
  int64_t warm_tokens = 0;  // steps after it (cached contexts)
  double warm_matcher_ms = 0;
  double masked_sample_ms = 0, plain_sample_ms = 0;  // mean sampling time with and without the mask
  double step_ms = 0;       // mean forward pass per token over all the steps
  int64_t contexts = 0;     // contexts the grammar cached
  double context_walk_ms = 0;  // of all matcher time: building those contexts' masks (trie walks)

  double sample_extra_ms() const { return std::max(0.0, masked_sample_ms - plain_sample_ms); }
  double cold_ms() const { return cold_matcher_ms + sample_extra_ms(); }
  double warm_ms() const { return warm_matcher_ms + sample_extra_ms(); }
};

// `grammar` must be freshly compiled (its cache empty) for the cold figure to mean first visits.
GrammarMaskCost measure_grammar_masks(const Model& model, KvCache& kv, const blocks::Exec& ex,
                                      const std::shared_ptr<grammar::CompiledGrammar>& grammar,
                                      const std::vector<int>& stop_token_ids, int first_token, int64_t tokens);

}  // namespace g4::cli
