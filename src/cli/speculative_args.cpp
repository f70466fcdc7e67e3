#include "cli/speculative_args.h"

#include <nlohmann/json.hpp>

#include "platform/error.h"

namespace g4::cli {

const char* const kSpeculativeHelp =
    "  --speculative M      off (default) | ngram: drafts looked up in the sequence's own prompt and\n"
    "                       output, verified in one batched step; the output is exactly the same as\n"
    "                       without (greedy or seeded), only faster when drafts are accepted\n"
    "  --draft-k N          drafts per verify step at most (default 4, 1..16; adapted per sequence)\n"
    "  --draft-model DIR    the Gemma 4 assistant drafter (--speculative draft)\n";

std::set<std::string> with_speculative_flags(std::set<std::string> value_flags) {
  value_flags.insert({"--speculative", "--draft-k", "--draft-model"});
  return value_flags;
}

SpeculativeOptions speculative_options(const Args& a) {
  SpeculativeOptions o;
  const std::string mode = a.get_or("--speculative", a.has("--draft-model") ? "draft" : "off");
  const auto m = parse_spec_mode(mode);
  if (!m) throw Error("--speculative " + mode + ": expected off, ngram or draft");
  o.mode = *m;
  const long long k = a.get_int("--draft-k", 4);
  if (k < 1 || k > 16) throw Error("--draft-k " + std::to_string(k) + ": expected 1..16");
  o.k_max = int(k);
  if (o.mode == SpecMode::Draft)
    throw Error("--speculative draft: this g4 has no assistant drafter yet (use --speculative ngram)");
  return o;
}

nlohmann::json speculative_options_json(const SpeculativeOptions& o) {
  return {{"mode", spec_mode_name(o.mode)}, {"k_max", o.k_max}};
}

}  // namespace g4::cli
