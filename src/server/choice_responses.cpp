#include "server/choice_responses.h"

#include "platform/error.h"

namespace g4::server {

using nlohmann::json;

ChoiceResponses::ChoiceResponses(const ResponseContext& ctx, int n) : ctx_(ctx) {
  if (n < 1) throw Error("a response needs at least one choice");
  choices_.reserve(size_t(n));
  for (int i = 0; i < n; ++i) {
    ResponseContext c = ctx;
    c.choice_index = i;
    c.usage_chunk = false;
    choices_.emplace_back(std::move(c));
  }
}

std::vector<json> ChoiceResponses::opening_chunks() const {
  std::vector<json> out;
  for (const auto& c : choices_)
    for (auto& chunk : c.opening_chunks()) out.push_back(std::move(chunk));
  return out;
}

std::vector<json> ChoiceResponses::on_event(const GenerationEvent& ev) {
  if (ev.choice < 0 || ev.choice >= size())
    throw Error("internal: an event for choice " + std::to_string(ev.choice) + " of a response with " +
                std::to_string(size()) + " choices");
  std::vector<json> out = choices_[size_t(ev.choice)].on_event(ev);
  if (ev.finished && ctx_.include_usage && finished()) out.push_back(choices_[0].usage_chunk(usage()));
  return out;
}

void ChoiceResponses::deadline_passed() {
  for (auto& c : choices_) c.deadline_passed();
}

bool ChoiceResponses::has_output() const {
  for (const auto& c : choices_)
    if (c.has_output()) return true;
  return false;
}

bool ChoiceResponses::finished() const {
  for (const auto& c : choices_)
    if (!c.finished()) return false;
  return true;
}

const ResponseBuilder* ChoiceResponses::failed() const {
  for (const auto& c : choices_)
    if (c.finished() && c.final_event().finish_reason == "error") return &c;
  return nullptr;
}

int64_t ChoiceResponses::completion_tokens() const {
  int64_t n = 0;
  for (const auto& c : choices_) n += c.final_event().generated_tokens;
  return n;
}

json ChoiceResponses::usage() const {
  const int64_t prompt = choices_[0].final_event().prompt_tokens, completion = completion_tokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", choices_[0].final_event().cached_tokens}}}};
}

json ChoiceResponses::final_response() const {
  json r = choices_[0].final_response();
  if (size() == 1) return r;
  r["choices"] = json::array();
  for (const auto& c : choices_) {
    json choice = c.final_response()["choices"][0];
    choice["g4"] = c.g4_extension();
    r["choices"].push_back(std::move(choice));
  }
  r["usage"] = usage();
  return r;
}

}  // namespace g4::server
