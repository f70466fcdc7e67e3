#include "server/readiness.h"

#include <ctime>

#include "server/generation_service.h"
#include "server/openai_response.h"
#include "server/token_text_stream.h"

namespace g4::server {

using nlohmann::json;

ProbeResult assess_probe(const ProbeObservation& o, const text::Tokenizer& tok, bool synthetic) {
  ProbeResult r;
  json checks = json::array();
  auto check = [&](const char* name, bool ok, const std::string& detail) {
    checks.push_back({{"name", name}, {"passed", ok}, {"detail", detail}});
    if (!ok && r.reason.empty()) r.reason = std::string(name) + ": " + detail;
  };
  check("finished", o.finish_reason == "length" || o.finish_reason == "stop",
        "finish reason \"" + o.finish_reason + "\"" + (o.error.empty() ? "" : " (" + o.error + ")"));
  check("generated", o.generated_tokens > 0, std::to_string(o.generated_tokens) + " tokens generated");
  check("text", !o.text.empty(), std::to_string(o.text.size()) + " bytes of text");
  const size_t bad = invalid_utf8_offset(o.text);
  check("utf8", bad == std::string::npos,
        bad == std::string::npos ? "valid UTF-8" : "invalid UTF-8 at byte " + std::to_string(bad));
  std::vector<int32_t> shown;
  for (int id : o.tokens)
    if (token_is_shown(tok, id)) shown.push_back(id);
  const std::string decoded = tok.decode(shown);
  bool round_trip = decoded == o.text;
  if (!round_trip && o.finish_reason == "stop" && decoded.compare(0, o.text.size(), o.text) == 0)
    for (const auto& s : o.stop_strings)
      if (decoded.compare(o.text.size(), s.size(), s) == 0) round_trip = true;  // cut at a stop string
  check("round_trip", round_trip,
        round_trip ? "streamed text equals decode(ids)"
                   : "streamed text (" + std::to_string(o.text.size()) + " bytes) differs from decode(ids) (" +
                         std::to_string(decoded.size()) + " bytes)");
  const bool degenerate = o.verdict.degenerate();
  const std::string kind(degeneracy_kind_name(o.verdict.kind));
  if (synthetic) {
    checks.push_back({{"name", "not_degenerate"},
                      {"passed", !degenerate},
                      {"enforced", false},
                      {"detail", "verdict " + kind + "; not enforced: random-weight checkpoint (g4 synth)"}});
  } else {
    check("not_degenerate", !degenerate, "verdict " + kind + (o.verdict.detail.empty() ? "" : ": " + o.verdict.detail));
  }
  r.passed = r.reason.empty();
  if (r.passed) r.reason = "ok";
  r.report = {{"assertions", checks},
              {"generated_tokens", o.generated_tokens},
              {"finish_reason", o.finish_reason},
              {"text", o.text.substr(0, 400)},
              {"degeneracy", o.verdict},
              {"synthetic", synthetic}};
  return r;
}

ProbeResult run_readiness_probe(GenerationService& service, int max_tokens, double timeout_s) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::chat;
  spec.model = service.limits().model_name;
  spec.messages = json::array({{{"role", "user"}, {"content", "Reply with one short sentence: what is the capital of France?"}}});
  spec.sampling.temperature = 0;
  spec.sampling.max_tokens = max_tokens;
  spec.deadline_seconds = timeout_s;
  ProbeObservation obs;
  auto started = service.start(spec, /*count_metrics=*/false);
  if (auto* e = std::get_if<ApiError>(&started)) {
    ProbeResult r;
    r.reason = "the probe request was refused: " + e->message;
    r.report = {{"error", error_body(*e)}};
    return r;
  }
  auto active = std::get<std::shared_ptr<ActiveRequest>>(started);
  ResponseContext ctx;
  ctx.endpoint = Endpoint::chat;
  ctx.id = make_id("chatcmpl-ready-");
  ctx.model = spec.model;
  ctx.tokenizer = service.model().tokenizer.get();
  ctx.stop_token_ids = service.stop_token_ids();
  ResponseBuilder builder(ctx);
  GenerationEvent ev;
  while (!builder.finished()) {
    if (!active->pop(ev, active->deadline)) {
      service.cancel(active->engine_id);
      while (!builder.finished() && active->pop(ev, Clock::now() + std::chrono::seconds(30))) builder.on_event(ev);
      ProbeResult r;
      r.reason = "the probe did not finish within " + std::to_string(int(timeout_s)) + " s";
      return r;
    }
    builder.on_event(ev);
  }
  obs.tokens = builder.tokens();
  obs.text = builder.raw_text();
  obs.finish_reason = builder.final_event().finish_reason;
  obs.error = builder.final_event().error;
  obs.generated_tokens = builder.final_event().generated_tokens;
  obs.verdict = builder.final_event().verdict;
  if (!service.model().missing_template_tokens.empty()) obs.stop_strings.push_back("<turn|>");
  ProbeResult r = assess_probe(obs, *service.model().tokenizer, service.model().synthetic);
  r.report["response"] = builder.final_response();
  if (builder.repaired_tail_bytes() > 0)
    r.report["engine_text_stream_note"] =
        "the engine's text stream dropped " + std::to_string(builder.repaired_tail_bytes()) +
        " held bytes at finish (byte-fallback run before a stop token or at max_tokens); the server restored them from decode(ids)";
  return r;
}

void ReadinessState::set(const ProbeResult& r) {
  std::lock_guard<std::mutex> l(mu_);
  ready_ = r.passed;
  reason_ = r.passed ? "ok" : r.reason;
  report_ = r.report;
  ++checks_;
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  checked_at_ = b;
}

void ReadinessState::set_pending(const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  ready_ = false;
  reason_ = reason;
}

bool ReadinessState::ready() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_;
}

std::pair<int, json> ReadinessState::response() const {
  std::lock_guard<std::mutex> l(mu_);
  json body = {{"ready", ready_}, {"reason", reason_}, {"checks_run", checks_}};
  if (!checked_at_.empty()) body["checked_at"] = checked_at_;
  if (!report_.is_null()) body["check"] = report_;
  return {ready_ ? 200 : 503, body};
}

}  // namespace g4::server
