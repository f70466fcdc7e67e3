// StopMatcher: decides when a sequence is finished and which text may be shown so far.
//
// Fed each generated token with its decoded text piece, it returns the text that is safe to emit
// now. A suffix that could still be the start of a stop string is held back until it either
// completes the stop string (then it and everything after it are dropped) or stops matching (then
// it is released). Stop strings are matched on bytes across token boundaries, so the outcome does
// not depend on how the text was cut into pieces: the stop string that *ends* first wins (ties:
// the one starting first, i.e. the longer), exactly what a byte-at-a-time stream would see.
//
// Finish reasons: a stop token id (its text is not emitted) or a stop string -> "stop";
// max_tokens generated tokens -> "length". Held-back text is released when the sequence finishes
// for any reason other than a stop string.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace g4 {

enum class FinishReason { none, stop, length };
std::string_view finish_reason_name(FinishReason reason);  // "", "stop", "length"

struct StopUpdate {
  std::string text;           // emit this now (may be empty while a prefix is held back)
  bool finished = false;      // no more tokens should be generated
  FinishReason reason = FinishReason::none;
  std::string matched_stop;   // the stop string that ended the sequence, if one did
  int matched_token = -1;     // the stop token id that ended the sequence, if one did
};

class StopMatcher {
 public:
  // Expects validated values (SamplingParams::validate): non-empty stop strings, max_tokens >= 1.
  StopMatcher(std::vector<std::string> stop_strings, std::vector<int> stop_token_ids, int max_tokens);
  explicit StopMatcher(const SamplingParams& params);

  // One generated token and its decoded text. Counts towards max_tokens. After the sequence has
  // finished, returns an empty, finished update.
  StopUpdate on_token(int token_id, std::string_view text_piece);

  // Text only (no token accounting): for callers that check stop ids themselves.
  StopUpdate on_text(std::string_view text_piece);

  // The generator ended the sequence for its own reason (e.g. the context is full): releases the
  // held-back text; the caller chooses the finish reason.
  std::string flush();

  bool finished() const { return reason_ != FinishReason::none; }
  FinishReason finish_reason() const { return reason_; }
  int tokens_seen() const { return tokens_seen_; }
  size_t held_back_bytes() const { return pending_.size(); }

 private:
  StopUpdate finish(FinishReason reason, std::string text);
  size_t longest_partial_suffix() const;  // bytes at the end of pending_ that start some stop string

  std::vector<std::string> stop_strings_;
  std::vector<int> stop_token_ids_;
  int max_tokens_;
  size_t longest_stop_ = 0;
  std::string pending_;  // received, not yet emitted
  int tokens_seen_ = 0;
  FinishReason reason_ = FinishReason::none;
};

}  // namespace g4
