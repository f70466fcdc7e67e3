// Speculative decoding's settings, per-sequence draft length policy and statistics. The
// verification itself is part of the engine's step (engine.cpp, engine_verify.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/drafter.h"

namespace g4 {

struct GenerationRequest;

enum class SpecMode { Off, Ngram, Draft };
const char* spec_mode_name(SpecMode m);
std::optional<SpecMode> parse_spec_mode(const std::string& s);  // "off", "ngram", "draft"

struct SpeculativeOptions {
  SpecMode mode = SpecMode::Off;  // requests that do not choose
  int k_max = 4;                  // drafts per verify step at most; the rings keep k_max + 1 extra slots
  // A drafter model's drafts stop at the first step whose most likely token has a probability
  // below this (the drafter is unsure): rows it would waste are not fed.
  float p_min = 0.5f;
  std::string drafter_name;  // what make_drafter loads, for logs and /v1/models (a path)
  // The assistant drafter (mode Draft), or any other source (tests, `g4 bench`'s replay ceiling):
  // one drafter per sequence. Null: mode Draft is refused.
  std::function<std::unique_ptr<Drafter>(const GenerationRequest&, int choice)> make_drafter;
};

// Per sequence (summed per request by the server).
struct SpeculationStats {
  int64_t verify_steps = 0;  // steps that fed drafts
  int64_t drafted = 0, accepted = 0;
  std::vector<int64_t> accepted_at;  // [k]: verify steps whose draft at position j+1 was accepted
  std::vector<int64_t> drafted_at;   // [k]: verify steps that proposed a draft at position j+1
  double draft_seconds = 0;          // in the drafter
  void add(const SpeculationStats& o);
};
// {"verify_steps", "drafted", "accepted", "acceptance", "acceptance_at": [rate per position],
//  "tokens_per_step", "draft_s"}: for responses, logs and benchmarks.
nlohmann::json speculation_json(const SpeculationStats& s);

// How many drafts to ask for next. Full acceptance grows k; a rejection shrinks it to one more
// than what was accepted; nothing accepted drops to one draft, and nothing accepted at one draft
// pauses drafting for 8, 16, ... 128 steps, so a workload that accepts nothing pays for almost no
// draft rows.
class DraftLength {
 public:
  explicit DraftLength(int k_max) : k_max_(k_max), k_(k_max) {}
  int next();  // 0 while paused
  void observe(int proposed, int accepted);
  // A drafter model that proposed nothing (unsure) still cost a draft step: counted as a miss,
  // so one that stays unsure is asked less and less often.
  void observe_unsure() { observe(1, 0); }

 private:
  int k_max_, k_;
  int pause_ = 0, backoff_ = 0;
};

}  // namespace g4
