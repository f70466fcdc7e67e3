// The generating routes of HttpServer: POST /v1/chat/completions, /v1/completions and
// /v1/responses, each answered whole or as an SSE stream.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <optional>

#include "server/choice_responses.h"
#include "server/http_reply.h"
#include "server/http_server.h"
#include "server/openai_response.h"

namespace g4::server {

using nlohmann::json;

namespace {

void record_generation(const ChoiceResponses& choices, bool stream) {
  const ResponseBuilder& b = choices.choice(0);
  const GenerationEvent& f = b.final_event();
  json& r = t_record.fields;
  r["stream"] = stream;
  r["prompt_tokens"] = f.prompt_tokens;
  r["completion_tokens"] = choices.completion_tokens();
  r["finish_reason"] = b.finish_reason();
  if (choices.size() > 1) r["choices"] = choices.size();
  json v = {{"kind", degeneracy_kind_name(f.verdict.kind)}};
  if (f.verdict.degenerate()) v["detail"] = f.verdict.detail;
  r["degeneracy"] = v;
  if (f.stopped_degenerate) r["stopped_degenerate"] = true;
  if (f.spec.verify_steps > 0) r["speculative"] = speculation_json(f.spec);
  r["ttft_s"] = f.ttft_seconds;
  if (f.image_tokens > 0) {
    r["image_tokens"] = f.image_tokens;
    r["vision_s"] = f.vision_seconds;
    r["images_encoded"] = f.images_encoded;
    r["image_cache_hits"] = f.image_cache_hits;
  }
}

ApiError deadline_error_of(const ActiveRequest& a) {
  const double budget = std::chrono::duration<double>(a.deadline - a.submitted).count();
  return ApiError{504, "the request did not finish within its deadline of " + std::to_string(budget) + " s", "timeout_error",
                  "", "deadline_exceeded"};
}

ApiError engine_error_of(const ResponseBuilder& failed) {
  return ApiError{500, "generation failed: " + failed.final_event().error, "server_error", "", "engine_error"};
}

// Cancels on a deadline and waits (bounded) for the engine to confirm, so the cache is freed.
// Returns the stream chunks of what was generated meanwhile and of what the builder still held
// (a tool call cut short comes out with its partial arguments), closing chunks included: each
// choice cut by the deadline ends with finish_reason "length" (ResponseBuilder::deadline_passed).
std::vector<json> expire(GenerationService& service, ActiveRequest& a, ChoiceResponses& b) {
  b.deadline_passed();
  service.cancel(a.engine_id);
  std::vector<json> chunks;
  GenerationEvent ev;
  while (!b.finished() && a.pop(ev, Clock::now() + std::chrono::seconds(10)))
    for (json& c : b.on_event(ev)) chunks.push_back(std::move(c));
  return chunks;
}

// After a deadline: whether what was generated is the answer (some output came: text, or a forced
// tool call's start; every choice ended), or there is nothing to send but the deadline's error.
bool deadline_left_output(const ChoiceResponses& b) { return b.finished() && b.has_output(); }

// A response that is not streamed: every event until finished, or the error to send (deadline
// before any token, engine failure). A deadline after some tokens answers with them
// (finish_reason "length"), as max_tokens would. Records the log fields either way.
std::optional<ApiError> await_all(GenerationService& service, ActiveRequest& a, ChoiceResponses& b) {
  GenerationEvent ev;
  while (!b.finished()) {
    if (!a.pop(ev, a.deadline)) {
      (void)expire(service, a, b);
      t_record.fields["deadline_exceeded"] = true;
      if (!deadline_left_output(b)) return deadline_error_of(a);
      break;
    }
    b.on_event(ev);
  }
  record_generation(b, false);
  if (const ResponseBuilder* failed = b.failed()) return engine_error_of(*failed);
  return std::nullopt;
}

// Streams `provider` as text/event-stream. The connection may end before the generation does
// (client gone, write failed): then it is cancelled, so its sequence and KV cache are freed at
// the next engine step.
void start_event_stream(httplib::Response& res, httplib::ContentProviderWithoutLength provider,
                        std::shared_ptr<ActiveRequest> active, std::shared_ptr<ChoiceResponses> choices,
                        GenerationService* service) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", std::move(provider), [active, choices, service](bool) {
    if (!choices->finished()) service->cancel(active->engine_id);
  });
}

// What waiting for a stream's next engine event came to.
enum class StreamWait { event, deadline, client_gone };

// Waits for the next event until the deadline, which expires the generation (`expired` gets
// expire's chunks). While idle (queued or slow prefill) an SSE comment each second keeps proxies
// open and finds a client that went away.
StreamWait next_stream_event(ActiveRequest& a, ChoiceResponses& b, GenerationService& service, httplib::DataSink& sink,
                             GenerationEvent& ev, std::vector<json>* expired = nullptr) {
  for (;;) {
    const auto now = Clock::now();
    if (now >= a.deadline) {
      std::vector<json> deltas = expire(service, a, b);
      if (expired) *expired = std::move(deltas);
      t_record.fields["deadline_exceeded"] = true;
      return StreamWait::deadline;
    }
    if (a.pop(ev, std::min(a.deadline, now + std::chrono::seconds(1)))) return StreamWait::event;
    if (!sink.write(": keep-alive\n\n", 14)) {
      t_record.fields["client_disconnected"] = true;
      return StreamWait::client_gone;
    }
  }
}

// The chat/completions SSE stream: chunks as events arrive, keep-alive comments while idle, an
// error event on the deadline or an engine failure, then [DONE].
struct ChatStream {
  std::shared_ptr<ActiveRequest> active;
  std::shared_ptr<ChoiceResponses> builder;
  GenerationService* service;
  ApiError deadline_error;

  bool operator()(size_t, httplib::DataSink& sink) const {
    auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
    for (const json& c : builder->opening_chunks())
      if (!write(sse_event(c))) return false;
    GenerationEvent ev;
    std::vector<json> expired;
    while (!builder->finished()) {
      switch (next_stream_event(*active, *builder, *service, sink, ev, &expired)) {
        case StreamWait::deadline:
          if (deadline_left_output(*builder)) {  // what was generated, closed with "length"
            for (const json& c : expired) write(sse_event(c));
            record_generation(*builder, true);
          } else {
            t_record.fields["error"] = deadline_error.message;
            write(sse_event(error_body(deadline_error)));
          }
          write(sse_done());
          sink.done();
          return true;
        case StreamWait::client_gone: return false;
        case StreamWait::event: break;
      }
      for (const json& c : builder->on_event(ev)) {
        if (ev.finished && ev.finish_reason == "error") break;
        if (!write(sse_event(c))) {
          t_record.fields["client_disconnected"] = true;
          return false;
        }
      }
    }
    record_generation(*builder, true);
    if (const ResponseBuilder* failed = builder->failed()) {
      const ApiError e = engine_error_of(*failed);
      t_record.fields["error"] = e.message;
      write(sse_event(error_body(e)));
    }
    write(sse_done());
    sink.done();
    return true;
  }
};

// Stores a finished response's conversation (its input and output) for previous_response_id.
// A function call cut short (max_output_tokens, deadline) has arguments that are not a JSON
// object, which no chat template can render back: such a response is stored as a reason to
// refuse continuing it, not as a conversation that would fail later with a confusing error.
void remember_response(const ResponsesRequest& rr, const ChoiceResponses& chat, ResponseStore& store, const std::string& id) {
  if (!rr.store) return;
  json conversation = rr.conversation;
  for (auto& m : ResponsesBuilder::output_as_messages(chat)) {
    for (const json& call : m.value("tool_calls", json::array())) {
      const json args = json::parse(call["function"].value("arguments", std::string()), nullptr, false);
      if (!args.is_object())
        return store.put(id, json{{"unusable", "its function call '" + call["function"].value("name", std::string()) +
                                                   "' was cut short before its arguments were complete"}});
    }
    conversation.push_back(m);
  }
  store.put(id, std::move(conversation));
}

// The /v1/responses SSE stream: named events as the chat side produces chunks, keep-alive
// comments while idle, an "error" event on the deadline or an engine failure.
struct ResponsesStream {
  std::shared_ptr<ActiveRequest> active;
  std::shared_ptr<ChoiceResponses> chat;
  std::shared_ptr<ResponsesBuilder> out;
  std::shared_ptr<ResponsesRequest> rr;
  GenerationService* service;
  ResponseStore* store;
  std::string id;
  ApiError deadline_error;

  bool operator()(size_t, httplib::DataSink& sink) const {
    auto write = [&](const std::vector<ResponsesBuilder::Event>& events) {
      for (const auto& [type, payload] : events) {
        const std::string s = sse_named_event(type, payload);
        if (!sink.write(s.data(), s.size())) return false;
      }
      return true;
    };
    auto fail = [&](const ApiError& e) {
      const std::string s = sse_named_event("error", {{"type", "error"}, {"code", e.code}, {"message", e.message}});
      sink.write(s.data(), s.size());
      sink.done();
      return true;
    };
    if (!write(out->opening())) return false;
    GenerationEvent ev;
    std::vector<json> expired;
    while (!chat->finished()) {
      switch (next_stream_event(*active, *chat, *service, sink, ev, &expired)) {
        case StreamWait::deadline:
          if (!deadline_left_output(*chat)) return fail(deadline_error);
          write(out->on_chat_chunks(expired));  // then closed as incomplete, as max_output_tokens would
          continue;                             // every choice has finished
        case StreamWait::client_gone: return false;
        case StreamWait::event: break;
      }
      if (!write(out->on_chat_chunks(chat->on_event(ev)))) {
        t_record.fields["client_disconnected"] = true;
        return false;
      }
    }
    record_generation(*chat, true);
    if (const ResponseBuilder* failed = chat->failed()) return fail(engine_error_of(*failed));
    remember_response(*rr, *chat, *store, id);
    write(out->finish(*chat));
    sink.done();
    return true;
  }
};

}  // namespace

void HttpServer::route_generation() {
  httplib::Server& s = *svr_;
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::chat, req, res); });
  s.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::completion, req, res); });
  s.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) { responses(req, res); });
}

void HttpServer::generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_json_object(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const RequestJson& body = std::get<RequestJson>(parsed);
  auto spec_or = endpoint == Endpoint::chat ? parse_chat_request(body, service_.limits())
                                            : parse_completion_request(body, service_.limits());
  if (auto* e = std::get_if<ApiError>(&spec_or)) return send_error(res, *e);
  const GenerationSpec& spec = std::get<GenerationSpec>(spec_or);
  auto started = service_.start(spec);
  if (auto* e = std::get_if<ApiError>(&started)) return send_error(res, *e);
  std::shared_ptr<ActiveRequest> active = std::get<std::shared_ptr<ActiveRequest>>(started);

  const ResponseContext ctx = response_context(spec, endpoint, endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-");
  auto builder = std::make_shared<ChoiceResponses>(ctx, spec.n);
  GenerationService* service = &service_;

  const ApiError deadline_error = deadline_error_of(*active);
  if (!spec.stream) {
    if (auto e = await_all(*service, *active, *builder)) return send_error(res, *e);
    return send_json(res, 200, builder->final_response());
  }
  start_event_stream(res, ChatStream{active, builder, service, deadline_error}, active, builder, service);
}

ResponseContext HttpServer::response_context(const GenerationSpec& spec, Endpoint endpoint,
                                             const std::string& id_prefix) const {
  ResponseContext ctx;
  ctx.endpoint = endpoint;
  ctx.id = make_id(id_prefix);
  ctx.model = service_.model().id;
  ctx.created = int64_t(std::time(nullptr));
  ctx.logprobs = spec.sampling.logprobs;
  ctx.top_logprobs = spec.sampling.top_logprobs;
  ctx.include_usage = spec.include_usage;
  ctx.tokenizer = service_.model().tokenizer.get();
  ctx.stop_token_ids = service_.stop_token_ids();
  if (service_.model().missing_template_tokens.empty()) ctx.forced_prefix = forced_tool_call_prefix(spec);
  t_record.fields["request_id"] = ctx.id;
  t_record.fields["model"] = ctx.model;
  return ctx;
}

void HttpServer::responses(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_json_object(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  auto rr_or = responses_to_chat(std::get<RequestJson>(parsed), stored_responses_, service_.limits());
  if (auto* e = std::get_if<ApiError>(&rr_or)) return send_error(res, *e);
  auto rr = std::make_shared<ResponsesRequest>(std::move(std::get<ResponsesRequest>(rr_or)));
  auto spec_or = parse_chat_request(rr->chat_body, service_.limits());
  if (auto* e = std::get_if<ApiError>(&spec_or)) return send_error(res, responses_error(*e));
  const GenerationSpec& spec = std::get<GenerationSpec>(spec_or);
  auto started = service_.start(spec);
  if (auto* e = std::get_if<ApiError>(&started)) return send_error(res, *e);
  std::shared_ptr<ActiveRequest> active = std::get<std::shared_ptr<ActiveRequest>>(started);

  const ResponseContext ctx = response_context(spec, Endpoint::chat, "resp_");
  auto chat = std::make_shared<ChoiceResponses>(ctx, 1);
  auto out = std::make_shared<ResponsesBuilder>(ctx.id, ctx.model, ctx.created, rr->echo);
  GenerationService* service = &service_;
  const ApiError deadline_error = deadline_error_of(*active);
  if (!rr->stream) {
    if (auto e = await_all(*service, *active, *chat)) return send_error(res, *e);
    remember_response(*rr, *chat, stored_responses_, ctx.id);
    return send_json(res, 200, out->final_object(*chat));
  }
  start_event_stream(res, ResponsesStream{active, chat, out, rr, service, &stored_responses_, ctx.id, deadline_error}, active,
                     chat, service);
}

}  // namespace g4::server
