// The response to a request with n choices: one ResponseBuilder per choice, fed the engine's
// events by their `choice`, merged into one object (no stream) or one SSE stream whose chunks
// carry each choice's index. Usage counts the prompt once and every choice's completion tokens;
// with include_usage the usage chunk comes once, after the last choice finished.
#pragma once
#include <nlohmann/json.hpp>

#include <vector>

#include "server/openai_response.h"

namespace g4::server {

class ChoiceResponses {
 public:
  ChoiceResponses(const ResponseContext& ctx, int n);

  std::vector<nlohmann::json> opening_chunks() const;  // each choice's opening chunks
  // Routes the event to its choice; returns the SSE chunks it produces.
  std::vector<nlohmann::json> on_event(const GenerationEvent& event);

  bool finished() const;  // every choice has finished
  void deadline_passed();   // every choice: see ResponseBuilder::deadline_passed
  bool has_output() const;  // some choice has content, reasoning or a tool call
  int size() const { return int(choices_.size()); }
  const ResponseBuilder& choice(int i) const { return choices_[size_t(i)]; }
  // The first choice that ended with finish_reason "error", or null.
  const ResponseBuilder* failed() const;
  int64_t completion_tokens() const;
  nlohmann::json usage() const;
  // The whole response object (no stream). Valid once finished(). The top-level g4 field is the
  // first choice's; with n > 1 every choice also carries its own.
  nlohmann::json final_response() const;

 private:
  ResponseContext ctx_;
  std::vector<ResponseBuilder> choices_;
};

}  // namespace g4::server
