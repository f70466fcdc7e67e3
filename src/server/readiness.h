// Readiness: a real short generation through the whole serving path (chat template, tokenizer,
// engine, model, sampler, streaming detokenizer, response builder) with assertions on what came
// out (docs/lessons.md, 5: a probe that does not exercise the real path proves nothing).
//
// The probe passes when ALL of these hold:
//   finished      the engine finished it with reason "length" or "stop" (not error/cancelled)
//   generated     at least one token was generated
//   text          the text shown to a client is non-empty
//   utf8          that text is valid UTF-8
//   round_trip    it equals Tokenizer::decode of the shown token ids (the streaming detokenizer and
//                 the batch decoder agree); a stop string may cut it short of the decode
//   not_degenerate the degeneracy verdict is "ok" -- enforced only for real checkpoints. A
//                 checkpoint made by `g4 synth` (config.json has "g4_synth") has random weights,
//                 so its output IS degenerate noise: the verdict is reported, not required.
#pragma once
#include <nlohmann/json.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "engine/degeneracy.h"
#include "text/tokenizer.h"

namespace g4::server {

class GenerationService;

struct ProbeObservation {
  std::vector<int> tokens;   // generated ids minus stop tokens (as a response reports them)
  std::string text;          // every text piece the engine emitted, concatenated
  std::string finish_reason; // engine finish reason
  std::string error;
  int64_t generated_tokens = 0;
  DegeneracyVerdict verdict;
  std::vector<std::string> stop_strings;
};

struct ProbeResult {
  bool passed = false;
  std::string reason;     // the first failed assertion, or "ok"
  nlohmann::json report;  // every assertion with its detail, the text, the verdict
};

// Pure: the assertions above over one observation.
ProbeResult assess_probe(const ProbeObservation& obs, const text::Tokenizer& tokenizer, bool synthetic);

// Runs the probe through `service` (a greedy chat completion of `max_tokens` tokens), waiting at
// most timeout_s.
ProbeResult run_readiness_probe(GenerationService& service, int max_tokens, double timeout_s);

class ReadinessState {
 public:
  void set(const ProbeResult& r);
  void set_pending(const std::string& reason);
  bool ready() const;
  // 200/503 and the /ready body.
  std::pair<int, nlohmann::json> response() const;

 private:
  mutable std::mutex mu_;
  bool ready_ = false;
  std::string reason_ = "the readiness self-check has not run yet";
  nlohmann::json report_;
  int64_t checks_ = 0;
  std::string checked_at_;
};

}  // namespace g4::server
