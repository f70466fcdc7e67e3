// --speculative off|ngram|draft, --draft-k N, --draft-model DIR: the flags generate, bench and
// serve share for speculative decoding (engine/speculative.h).
#pragma once
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/args.h"
#include "engine/speculative.h"

namespace g4::cli {

extern const char* const kSpeculativeHelp;  // the flags' lines for a command's usage text
std::set<std::string> with_speculative_flags(std::set<std::string> value_flags);

// The engine's speculative settings from the flags (off when none is given). Throws naming the
// flag for a bad mode or k, or draft mode without a drafter.
SpeculativeOptions speculative_options(const Args& a);
nlohmann::json speculative_options_json(const SpeculativeOptions& o);  // {"mode", "k_max"}

}  // namespace g4::cli
