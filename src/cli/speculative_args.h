// --speculative off|ngram|draft, --draft-k N, --draft-model PATH, --draft-p-min P: the flags
// generate, bench and serve share for speculative decoding (engine/speculative.h).
#pragma once
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/args.h"
#include "engine/speculative.h"
#include "model/assistant.h"

namespace g4::cli {

extern const char* const kSpeculativeHelp;  // the flags' lines for a command's usage text
std::set<std::string> with_speculative_flags(std::set<std::string> value_flags);

struct SpeculativeSetup {
  SpeculativeOptions options;                         // for EngineOptions::speculative
  std::shared_ptr<const AssistantModel> assistant;    // --draft-model, loaded and paired
  int64_t min_matmul_input = 0;                       // for EngineOptions::min_matmul_input
};

// The engine's speculative settings from the flags (off when none is given), the drafter model
// loaded and checked against `target` (which must outlive every engine using the result).
// Throws naming the flag for a bad mode, k or p_min, or draft mode without a drafter.
SpeculativeSetup speculative_setup(const Args& a, const Model& target);
nlohmann::json speculative_json(const SpeculativeOptions& o);  // {"mode", "k_max"[, "draft_model", "p_min"]}

}  // namespace g4::cli
