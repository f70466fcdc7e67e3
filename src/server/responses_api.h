// POST /v1/responses (OpenAI's Responses API, text in and out) on the chat path: a request becomes
// the chat request it means (input items -> messages, instructions -> a system message,
// text.format -> response_format, function tools -> chat tools, max_output_tokens -> max_tokens),
// which parse_chat_request then validates like any other; the chat result becomes Responses
// output items (a message with output_text, function_call items). previous_response_id puts the
// stored conversation of an earlier response (its input and output; not its instructions, as
// OpenAI specifies) in front of the new input; the prefix cache then restores that conversation's
// KV instead of prefilling it again. Fields g4 does not honour are refused with a 400 naming them.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/choice_responses.h"
#include "server/openai_request.h"

namespace g4::server {

// The conversations of recent responses (chat messages, output included), newest kept.
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = 512) : capacity_(capacity) {}
  void put(const std::string& id, nlohmann::json conversation);
  std::optional<nlohmann::json> get(const std::string& id) const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, nlohmann::json>> items_;  // oldest first
};

struct ResponsesRequest {
  RequestJson chat_body;        // for parse_chat_request (ordered: its schemas keep their declared order)
  nlohmann::json conversation;  // previous conversation + this input (no instructions), chat messages
  std::string previous_response_id;
  bool store = true;
  bool stream = false;
  nlohmann::json echo;          // request fields the response object repeats (instructions, metadata, ...)
};

// Body -> the chat request it means, or the 4xx naming the field (input[i]..., text.format, ...).
std::variant<ResponsesRequest, ApiError> responses_to_chat(const RequestJson& body, const ResponseStore& store,
                                                         const RequestLimits& limits);

// An error of the chat request a Responses request became, naming the field the client sent:
// max_tokens -> max_output_tokens, response_format -> text.format, messages -> input (the
// message index is the chat's, which counts instructions and any stored conversation first).
ApiError responses_error(ApiError chat_error);

// Builds the Responses object and, when streaming, its events in the documented order:
// response.created, response.in_progress, then per output item output_item.added (and for a
// message content_part.added, output_text.delta..., output_text.done, content_part.done; for a
// function call function_call_arguments.delta, .done), output_item.done, and response.completed
// (or response.incomplete when max_output_tokens ran out). Every event carries sequence_number.
class ResponsesBuilder {
 public:
  ResponsesBuilder(std::string id, std::string model, int64_t created, nlohmann::json echo);

  using Event = std::pair<std::string, nlohmann::json>;  // type, payload
  std::vector<Event> opening();
  // The chat chunks ChoiceResponses produced for one engine event (one choice).
  std::vector<Event> on_chat_chunks(const std::vector<nlohmann::json>& chunks);
  // Once the chat side finished: closes the open items, adds the function calls, and the final event.
  std::vector<Event> finish(const ChoiceResponses& chat);
  // The Responses object of a finished chat response.
  nlohmann::json final_object(const ChoiceResponses& chat) const;
  // This response's output as chat messages, for the store.
  static nlohmann::json output_as_messages(const ChoiceResponses& chat);

 private:
  Event event(const std::string& type, nlohmann::json payload);
  nlohmann::json shell(const std::string& status) const;  // the response object without output

  std::string id_, model_;
  int64_t created_ = 0;
  nlohmann::json echo_;
  int64_t seq_ = 0;
  bool message_open_ = false;
  std::string message_id_;
  std::string text_;
  int output_index_ = 0;
};

// "event: TYPE\ndata: {json}\n\n"
std::string sse_named_event(const std::string& type, const nlohmann::json& payload);

}  // namespace g4::server
