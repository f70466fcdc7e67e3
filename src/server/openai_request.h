// OpenAI request parsing and validation, as pure functions: a request body goes in, a validated
// GenerationSpec (or an ApiError naming the field and the problem) comes out. Nothing here touches
// the model, the tokenizer or the engine; the prompt is encoded later (generation_service.h).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/speculative.h"
#include "engine/sampling_params.h"
#include "server/api_error.h"

namespace g4::server {

enum class Endpoint { chat, completion };

// A request body, members in the order the client wrote them. A JSON schema's properties are
// generated in that declared order (as OpenAI's strict mode does), and a sorted nlohmann::json
// would lose it as soon as the body is parsed; so bodies, and the tools and schemas taken from
// them, stay ordered_json up to the grammar.
using RequestJson = nlohmann::ordered_json;

// What validation needs to know about the served model.
struct RequestLimits {
  std::string model_name;          // the one id /v1/models lists; requests must name it
  int vocab_size = 0;
  int64_t max_context = 4096;      // prompt + completion tokens per sequence
  int default_max_tokens = 512;    // when the request gives neither max_tokens nor max_completion_tokens
  double max_deadline_seconds = 600;
  int max_choices = 1;             // n: each choice takes a running slot (--max-seqs)
  // Image parts: accepted only when the model has a vision tower; otherwise this says why not.
  bool accepts_images = false;
  std::string images_refused = "the served model has no vision tower";
};

// One image content part, in prompt order: where it was (for errors), its URL (data: or
// http(s)) and the soft-token budget its `detail` asked for (0: the default).
struct ImagePart {
  std::string where;  // "messages[1].content[0]"
  std::string url;
  int budget = 0;
};

struct GenerationSpec {
  Endpoint endpoint = Endpoint::chat;
  std::string model;
  // chat
  nlohmann::json messages;                       // array, validated by the chat template
  RequestJson tools;                             // null or the tools passed to the template
  std::string tool_choice = "auto";              // "none" | "auto" | "required" | "function"
  std::string forced_function;                   // tool_choice "function": its name
  bool enable_thinking = false;                  // chat_template_kwargs.enable_thinking / reasoning_effort
  // completion
  std::string prompt;
  std::vector<int> prompt_tokens;                // prompt given as token ids (fed as is)
  bool prompt_is_tokens = false;

  // Constrained decoding: GBNF from response_format (json_object / json_schema) or the `grammar`
  // extension field; empty: none. grammar_source names the field it came from.
  std::string grammar;
  std::string grammar_source;

  int n = 1;                // choices: one prefill, then choice i samples with seed + i
  SamplingParams sampling;  // stop_token_ids are added by the service (the model's own stop set)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  double deadline_seconds = 0;  // 0: the server's --request-timeout; g4.deadline_ms lowers it
  // g4.speculative ("off" | "ngram" | "draft") and g4.draft_k: nullopt / 0 take the server's.
  std::optional<SpecMode> speculative;
  int draft_k = 0;
  // Image parts in the order the template writes their <|image|> placeholders, and the budget
  // (g4.max_image_tokens) for parts whose detail is "auto" or absent; 0: the server's.
  std::vector<ImagePart> images;
  int max_image_tokens = 0;
};

// Body bytes -> JSON object. Refuses invalid UTF-8 (naming the byte offset), malformed JSON and
// anything but an object.
std::variant<RequestJson, ApiError> parse_json_object(std::string_view body);

// The first byte offset where `s` is not valid UTF-8, or npos.
size_t invalid_utf8_offset(std::string_view s);

std::variant<GenerationSpec, ApiError> parse_chat_request(const RequestJson& body, const RequestLimits& limits);
std::variant<GenerationSpec, ApiError> parse_completion_request(const RequestJson& body, const RequestLimits& limits);

// tool_choice "required" / a named function is enforced by writing the start of the call into
// the generation prompt (the model continues inside it): "<|tool_call>call:" or
// "<|tool_call>call:NAME{". Empty for "auto" and "none".
std::string forced_tool_call_prefix(const GenerationSpec& spec);

// The checks a prompt can only get once it is encoded: empty, or too long for the context.
std::variant<std::monostate, ApiError> check_prompt_length(size_t prompt_tokens, const GenerationSpec& spec,
                                                           const RequestLimits& limits);

}  // namespace g4::server
