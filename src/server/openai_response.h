// OpenAI response building, as pure functions of the engine's events: a ResponseBuilder takes the
// GenerationEvents of one request in order and produces the SSE chunks (stream) or the final
// object (no stream) for /v1/chat/completions or /v1/completions, with usage and the documented
// `g4` extension field:
//   "g4": {"degeneracy": {"kind": "ok"|..., "degenerate", "span", "n", "repeats", "fraction", "detail"},
//          "stopped_degenerate": bool, "finish_detail": engine finish reason,
//          "timings": {"queue_s", "prefill_s", "decode_s", "ttft_s"},
//          "tool_call_errors": [...] (only when a tool call did not parse)}
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/openai_request.h"
#include "server/output_splitter.h"
#include "text/tokenizer.h"

namespace g4::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::chat;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;  // unix seconds
  bool logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;
  const text::Tokenizer* tokenizer = nullptr;  // token strings for logprobs (may be null)
  std::vector<int> stop_token_ids;             // excluded from logprobs (they are never shown)
  std::string forced_prefix;                   // text written into the prompt that the output continues
  int choice_index = 0;                        // "index" of this builder's choice
  bool usage_chunk = true;                     // emit the usage chunk itself (false: ChoiceResponses does)
};

// "data: {json}\n\n"
std::string sse_event(const nlohmann::json& payload);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseContext ctx);

  // Chunks to send before any token (chat: the assistant role delta).
  std::vector<nlohmann::json> opening_chunks() const;
  // Accumulates the event; returns the SSE chunks it produces (ignored when not streaming).
  std::vector<nlohmann::json> on_event(const GenerationEvent& event);

  bool finished() const { return finished_; }
  const GenerationEvent& final_event() const { return final_; }
  // The request's deadline passed and its generation is being cancelled: a choice that ends
  // "cancelled" now ended by the deadline, and reports what it generated with finish_reason
  // "length" (g4.finish_detail "deadline_exceeded"), a tool call with its partial arguments.
  void deadline_passed() { deadline_passed_ = true; }
  bool ended_by_deadline() const { return ended_by_deadline_; }
  bool has_output() const { return !content_.empty() || !reasoning_.empty() || !calls_.empty(); }
  // The OpenAI finish_reason: stop, length, tool_calls (or the engine's reason otherwise).
  std::string finish_reason() const;
  nlohmann::json usage() const;
  // The closing stream chunk of include_usage: no choices, `usage`, and this choice's g4 field.
  nlohmann::json usage_chunk(nlohmann::json usage) const;
  nlohmann::json g4_extension() const;
  // The whole response object (no stream). Valid once finished().
  nlohmann::json final_response() const;

  const std::string& raw_text() const { return raw_text_; }  // every text piece, as generated
  // Bytes the engine's text stream still held when the sequence finished (a byte-fallback run
  // before a stop token or at max_tokens) that this builder restored from decode(ids). Should be
  // 0; reported in g4.repaired_tail_bytes until the engine flushes its detokenizer on finish.
  size_t repaired_tail_bytes() const { return repaired_; }
  const std::vector<int>& tokens() const { return tokens_; }

 private:
  nlohmann::json chunk(nlohmann::json choice_delta_or_text, const nlohmann::json& finish_reason,
                       const nlohmann::json& logprobs) const;
  nlohmann::json logprob_entries(const std::vector<TokenInfo>& tokens) const;  // chat format
  void add_legacy_logprobs(const std::vector<TokenInfo>& tokens, size_t text_offset, nlohmann::json& into) const;
  nlohmann::json tool_call_json(const text::ToolCall& call, size_t index, bool with_index) const;

  ResponseContext ctx_;
  OutputSplitter splitter_;
  std::string raw_text_;
  std::string content_, reasoning_;
  std::vector<text::ToolCall> calls_;
  size_t ok_calls_ = 0;
  bool saw_stop_token_ = false;
  size_t repaired_ = 0;
  std::string repair_tail(const GenerationEvent& ev, const std::string& text);
  std::vector<int> tokens_;
  nlohmann::json chat_logprobs_ = nlohmann::json::array();
  nlohmann::json legacy_logprobs_;
  bool finished_ = false;
  bool deadline_passed_ = false, ended_by_deadline_ = false;
  GenerationEvent final_;
};

// A short random id with a prefix ("chatcmpl-", "cmpl-", "call_").
std::string make_id(const std::string& prefix);

}  // namespace g4::server
