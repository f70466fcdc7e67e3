#include "server/openai_response.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "server/openai_request.h"
#include "server/token_text_stream.h"

namespace g4::server {

using nlohmann::json;

std::string sse_event(const json& payload) {
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string make_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % 62];
  return id;
}

ResponseBuilder::ResponseBuilder(ResponseContext ctx) : ctx_(std::move(ctx)) {
  // A forced tool-call start is part of the answer: the splitter sees it before any token.
  if (!ctx_.forced_prefix.empty()) (void)splitter_.push(ctx_.forced_prefix);
  if (ctx_.endpoint == Endpoint::completion)
    legacy_logprobs_ = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                        {"text_offset", json::array()}};
}

namespace {

// A token's text and bytes for logprobs: the decoded piece, or the single byte of a byte piece.
std::pair<std::string, json> token_display(const text::Tokenizer* tok, int id) {
  if (!tok || !tok->vocab().valid_id(id)) return {"", json::array()};
  std::string s(tok->token_text(id));
  if (s.empty() && tok->vocab().byte_value(id) >= 0) s = std::string(1, char(tok->vocab().byte_value(id)));
  json bytes = json::array();
  for (unsigned char c : s) bytes.push_back(int(c));
  if (invalid_utf8_offset(s) != std::string::npos) s = std::string(tok->vocab().piece(id));  // a lone byte
  return {s, bytes};
}

double finite_logprob(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

}  // namespace

json ResponseBuilder::logprob_entries(const std::vector<TokenInfo>& tokens) const {
  json out = json::array();
  for (const TokenInfo& t : tokens) {
    auto [s, bytes] = token_display(ctx_.tokenizer, t.token);
    json e = {{"token", s}, {"logprob", finite_logprob(t.logprob)}, {"bytes", bytes}, {"top_logprobs", json::array()}};
    for (const TokenLogprob& alt : t.top_logprobs) {
      if (int(e["top_logprobs"].size()) >= ctx_.top_logprobs) break;
      auto [as, ab] = token_display(ctx_.tokenizer, alt.token);
      e["top_logprobs"].push_back({{"token", as}, {"logprob", finite_logprob(alt.logprob)}, {"bytes", ab}});
    }
    out.push_back(std::move(e));
  }
  return out;
}

void ResponseBuilder::add_legacy_logprobs(const std::vector<TokenInfo>& tokens, size_t text_offset, json& into) const {
  for (const TokenInfo& t : tokens) {
    auto [s, bytes] = token_display(ctx_.tokenizer, t.token);
    into["tokens"].push_back(s);
    into["token_logprobs"].push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const TokenLogprob& alt : t.top_logprobs) {
      if (int(top.size()) >= ctx_.top_logprobs) break;
      top[token_display(ctx_.tokenizer, alt.token).first] = finite_logprob(alt.logprob);
    }
    into["top_logprobs"].push_back(top);
    into["text_offset"].push_back(text_offset);
  }
}

json ResponseBuilder::tool_call_json(const text::ToolCall& call, size_t index, bool with_index) const {
  // Ids are unique across the choices of one response.
  const std::string choice = ctx_.choice_index > 0 ? std::to_string(ctx_.choice_index) + "_" : "";
  json j = {{"id", "call_" + choice + std::to_string(index) + "_" + ctx_.id.substr(ctx_.id.find('-') + 1, 12)},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments_json()}}}};
  if (with_index) j["index"] = index;
  return j;
}

json ResponseBuilder::chunk(json delta_or_text, const json& finish_reason, const json& logprobs) const {
  json choice = {{"index", ctx_.choice_index}, {"finish_reason", finish_reason}, {"logprobs", logprobs}};
  json c = {{"id", ctx_.id}, {"created", ctx_.created}, {"model", ctx_.model}, {"system_fingerprint", "g4"}};
  if (ctx_.endpoint == Endpoint::chat) {
    choice["delta"] = std::move(delta_or_text);
    c["object"] = "chat.completion.chunk";
  } else {
    choice["text"] = std::move(delta_or_text);
    c["object"] = "text_completion";
  }
  c["choices"] = json::array({choice});
  if (ctx_.include_usage) c["usage"] = nullptr;
  return c;
}

std::vector<json> ResponseBuilder::opening_chunks() const {
  if (ctx_.endpoint != Endpoint::chat) return {};
  return {chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)};
}

std::string ResponseBuilder::repair_tail(const GenerationEvent& ev, const std::string& text) {
  // A stop string legitimately cuts the text short of decode(ids); only a stop token, max_tokens
  // or an engine-side stop can leave bytes stranded in the detokenizer.
  const bool stop_string = ev.finish_reason == "stop" && !saw_stop_token_ && !ev.stopped_degenerate;
  if (!ctx_.tokenizer || stop_string || ev.finish_reason == "error") return "";
  std::vector<int32_t> shown;
  for (int id : tokens_)
    if (token_is_shown(*ctx_.tokenizer, id)) shown.push_back(id);
  const std::string full = ctx_.tokenizer->decode(shown);
  const std::string have = raw_text_ + text;
  if (full.size() <= have.size() || full.compare(0, have.size(), have) != 0) return "";
  repaired_ = full.size() - have.size();
  return full.substr(have.size());
}

std::vector<json> ResponseBuilder::on_event(const GenerationEvent& ev) {
  std::vector<json> out;
  if (finished_) return out;
  std::vector<TokenInfo> shown;
  for (const TokenInfo& t : ev.tokens) {
    if (std::find(ctx_.stop_token_ids.begin(), ctx_.stop_token_ids.end(), t.token) != ctx_.stop_token_ids.end()) {
      saw_stop_token_ = true;
      continue;
    }
    shown.push_back(t);
    tokens_.push_back(t.token);
  }
  std::string text = ev.text;
  if (ev.finished) text += repair_tail(ev, text);
  const size_t text_offset = raw_text_.size();
  raw_text_ += text;
  json logprobs = nullptr;
  if (ctx_.endpoint == Endpoint::chat) {
    OutputDelta d = splitter_.push(text);
    if (ev.finished) {
      OutputDelta rest = splitter_.finish();
      d.content += rest.content;
      d.reasoning += rest.reasoning;
      for (auto& c : rest.tool_calls) d.tool_calls.push_back(std::move(c));
      // A call max_tokens cut short comes back with what was generated, its arguments as far as
      // they got (OpenAI does the same, finish_reason "length"), rather than as a parse error.
      // "cancelled" is a deadline (a stream sends this before its error event) or a client gone.
      if (ev.finish_reason == "length" || ev.finish_reason == "cancelled")
        for (auto& c : d.tool_calls)
          if (c.unterminated) c = text::parse_cut_tool_call(c.raw);
    }
    if (ctx_.logprobs && !shown.empty()) {
      json entries = logprob_entries(shown);
      for (auto& e : entries) chat_logprobs_.push_back(e);
      logprobs = {{"content", entries}};
    }
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    json calls = json::array();
    for (auto& c : d.tool_calls) {
      if (c.ok()) calls.push_back(tool_call_json(c, ok_calls_++, true));
      calls_.push_back(std::move(c));
    }
    if (!calls.empty()) delta["tool_calls"] = calls;
    content_ += d.content;
    reasoning_ += d.reasoning;
    if (!delta.empty() || !logprobs.is_null()) out.push_back(chunk(delta, nullptr, logprobs));
  } else {
    if (ctx_.logprobs && !shown.empty()) {
      logprobs = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                  {"text_offset", json::array()}};
      add_legacy_logprobs(shown, text_offset, logprobs);
      add_legacy_logprobs(shown, text_offset, legacy_logprobs_);
    }
    content_ += text;
    if (!text.empty() || !logprobs.is_null()) out.push_back(chunk(text, nullptr, logprobs));
  }
  if (ev.finished) {
    finished_ = true;
    ended_by_deadline_ = deadline_passed_ && ev.finish_reason == "cancelled";
    final_ = ev;
    final_.text.clear();
    final_.tokens.clear();
    json last = chunk(ctx_.endpoint == Endpoint::chat ? json::object() : json(""), finish_reason(), nullptr);
    last["g4"] = g4_extension();
    out.push_back(std::move(last));
    if (ctx_.include_usage && ctx_.usage_chunk) out.push_back(usage_chunk(usage()));
  }
  return out;
}

std::string ResponseBuilder::finish_reason() const {
  if (ended_by_deadline_) return "length";
  const std::string& r = final_.finish_reason;
  if (r == "stop") {
    for (const auto& c : calls_)
      if (c.ok()) return "tool_calls";
  }
  return r;
}

json ResponseBuilder::usage() const {
  json u = {{"prompt_tokens", final_.prompt_tokens},
            {"completion_tokens", final_.generated_tokens},
            {"total_tokens", final_.prompt_tokens + final_.generated_tokens},
            {"prompt_tokens_details", {{"cached_tokens", final_.cached_tokens}}}};
  // Images' soft tokens are prompt tokens (each takes a position); this says how many.
  if (final_.image_tokens > 0) u["prompt_tokens_details"]["image_tokens"] = final_.image_tokens;
  return u;
}

json ResponseBuilder::usage_chunk(json usage) const {
  return {{"id", ctx_.id},
          {"object", ctx_.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ctx_.created},
          {"model", ctx_.model},
          {"system_fingerprint", "g4"},
          {"choices", json::array()},
          {"usage", std::move(usage)},
          {"g4", g4_extension()}};
}

json ResponseBuilder::g4_extension() const {
  json g = {{"degeneracy", final_.verdict},
            {"stopped_degenerate", final_.stopped_degenerate},
            {"finish_detail", ended_by_deadline_ ? "deadline_exceeded" : final_.finish_reason},
            {"timings",
             {{"queue_s", final_.queue_seconds},
              {"prefill_s", final_.prefill_seconds},
              {"decode_s", final_.decode_seconds},
              {"ttft_s", final_.ttft_seconds}}}};
  json errors = json::array();
  for (const auto& c : calls_)
    if (!c.ok()) errors.push_back(text::tool_call_json(c)["error"]);
  if (!errors.empty()) g["tool_call_errors"] = errors;
  if (repaired_ > 0) g["repaired_tail_bytes"] = repaired_;
  if (final_.spec.verify_steps > 0) g["speculative"] = speculation_json(final_.spec);
  if (final_.image_tokens > 0) g["timings"]["vision_s"] = final_.vision_seconds;
  return g;
}

json ResponseBuilder::final_response() const {
  json r = {{"id", ctx_.id}, {"created", ctx_.created}, {"model", ctx_.model}, {"system_fingerprint", "g4"}};
  json choice = {{"index", ctx_.choice_index}, {"finish_reason", finish_reason()}, {"logprobs", nullptr}};
  if (ctx_.endpoint == Endpoint::chat) {
    r["object"] = "chat.completion";
    json calls = json::array();
    size_t i = 0;
    for (const auto& c : calls_)
      if (c.ok()) calls.push_back(tool_call_json(c, i++, false));
    json msg = {{"role", "assistant"}, {"content", content_}};
    if (content_.empty() && !calls.empty()) msg["content"] = nullptr;
    if (!reasoning_.empty()) msg["reasoning_content"] = reasoning_;
    if (!calls.empty()) msg["tool_calls"] = calls;
    choice["message"] = msg;
    if (ctx_.logprobs) choice["logprobs"] = {{"content", chat_logprobs_}};
  } else {
    r["object"] = "text_completion";
    choice["text"] = content_;
    if (ctx_.logprobs) choice["logprobs"] = legacy_logprobs_;
  }
  r["choices"] = json::array({choice});
  r["usage"] = usage();
  r["g4"] = g4_extension();
  return r;
}

}  // namespace g4::server
