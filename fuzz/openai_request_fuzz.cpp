// libFuzzer target: the OpenAI request body (server/openai_request.h: parse_json_object, then
// parse_chat_request and parse_completion_request, then the chat template on accepted messages).
// Each body is parsed twice: for a model without a vision tower (image parts refused) and for
// one with (image parts reach read_image_url_part; their data: URLs go through parse_data_url).
// Asserts: every refusal is an ApiError with a 4xx status and a message; nothing else escapes;
// an accepted request's sampling parameters pass SamplingParams::validate (what the engine
// would otherwise refuse with a 5xx), max_tokens is positive, completion token prompts are in
// the vocabulary, and its messages render through the chat template or are refused by it with
// g4::Error (which the service answers 400).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>
#include <variant>

#include "fuzz_util.h"
#include "server/image_parts.h"
#include "server/openai_request.h"
#include "text/chat_template.h"

using namespace g4;
using namespace g4::server;
using nlohmann::json;

namespace {

void check_api_error(const ApiError& e) {
  G4_FUZZ_CHECK(e.status >= 400 && e.status < 500);
  G4_FUZZ_CHECK(!e.message.empty());
  // The server serializes with error_handler_t::replace: a message may quote a byte of a cut
  // UTF-8 sequence (nlohmann's parse errors do), which becomes U+FFFD, never an exception.
  (void)error_body(e).dump(-1, ' ', false, json::error_handler_t::replace);
}

void check_spec(const GenerationSpec& s, const RequestLimits& limits) {
  G4_FUZZ_CHECK(s.sampling.max_tokens > 0);
  try {
    s.sampling.validate(limits.vocab_size);
  } catch (const g4::Error& e) {
    std::fprintf(stderr, "accepted request fails SamplingParams::validate: %s\n", e.what());
    G4_FUZZ_CHECK(false);
  }
  for (int t : s.prompt_tokens) G4_FUZZ_CHECK(t >= 0 && t < limits.vocab_size);
  G4_FUZZ_CHECK(s.deadline_seconds >= 0);
  if (s.endpoint == Endpoint::chat) {
    try {
      (void)text::render_chat(s.messages, s.tools, text::ChatOptions{});
    } catch (const g4::Error& e) {
      fuzz::check_error(e);
    }
  }
  G4_FUZZ_CHECK(limits.accepts_images || s.images.empty());
  for (const ImagePart& p : s.images) {
    G4_FUZZ_CHECK(!p.where.empty() && !p.url.empty());
    G4_FUZZ_CHECK(p.budget == 0 || p.budget == 70 || p.budget == 1120);
    if (p.url.rfind("data:", 0) != 0) continue;
    auto d = parse_data_url(p.url, p.where);
    if (auto* e = std::get_if<ApiError>(&d)) check_api_error(*e);
  }
  for (size_t n : {size_t(0), size_t(1), size_t(limits.max_context), size_t(1) << 40}) {
    auto r = check_prompt_length(n, s, limits);
    if (auto* e = std::get_if<ApiError>(&r)) check_api_error(*e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  limits.model_name = "tiny";
  limits.vocab_size = 1000;
  limits.max_context = 512;
  limits.default_max_tokens = 64;
  auto parsed = parse_json_object(in);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    check_api_error(*e);
    return 0;
  }
  const RequestJson& body = std::get<RequestJson>(parsed);
  G4_FUZZ_CHECK(body.is_object());
  for (bool images : {false, true}) {
    limits.accepts_images = images;
    for (auto* parse : {&parse_chat_request, &parse_completion_request}) {
      auto r = parse(body, limits);
      if (auto* e = std::get_if<ApiError>(&r))
        check_api_error(*e);
      else
        check_spec(std::get<GenerationSpec>(r), limits);
    }
  }
  return 0;
}
