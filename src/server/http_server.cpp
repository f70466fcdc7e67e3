#include "server/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

#include "platform/error.h"
#include "server/choice_responses.h"
#include "server/openai_response.h"

namespace g4::server {

using nlohmann::json;

namespace {

// What a handler learned about its request, for the log line the logger callback writes after
// the response (streams included) is sent. Handlers and the logger run on the same worker thread.
struct RequestRecord {
  json fields = json::object();
  Clock::time_point start = Clock::now();
};
thread_local RequestRecord t_record;

std::string now_iso() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char b[40];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%03ldZ", b, ts.tv_nsec / 1000000);
  return out;
}

std::string route_label(const std::string& path) {
  static const char* kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/tokenize",
                                  "/detokenize",          "/health",         "/ready",     "/metrics"};
  for (const char* r : kRoutes)
    if (path == r) return r;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  if (e.status == 429) res.set_header("Retry-After", "1");
  if (e.status == 503) res.set_header("Retry-After", "5");
  t_record.fields["error"] = e.message;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
  return diff == 0;
}

bool protected_route(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

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
  r["ttft_s"] = f.ttft_seconds;
}

ApiError deadline_error_of(const ActiveRequest& a) {
  const double budget = std::chrono::duration<double>(a.deadline - a.submitted).count();
  return ApiError{504, "the request did not finish within its deadline of " + std::to_string(budget) + " s", "timeout_error",
                  "", "deadline_exceeded"};
}

// Cancels on a deadline and waits (bounded) for the engine to confirm, so the cache is freed.
void expire(GenerationService& service, ActiveRequest& a, ChoiceResponses& b) {
  service.cancel(a.engine_id);
  GenerationEvent ev;
  while (!b.finished() && a.pop(ev, Clock::now() + std::chrono::seconds(10))) b.on_event(ev);
}

// A response that is not streamed: every event until finished, or the error to send (deadline,
// engine failure). Records the log fields either way.
std::optional<ApiError> await_all(GenerationService& service, ActiveRequest& a, ChoiceResponses& b) {
  GenerationEvent ev;
  while (!b.finished()) {
    if (!a.pop(ev, a.deadline)) {
      expire(service, a, b);
      t_record.fields["deadline_exceeded"] = true;
      return deadline_error_of(a);
    }
    b.on_event(ev);
  }
  record_generation(b, false);
  if (const ResponseBuilder* failed = b.failed())
    return ApiError{500, "generation failed: " + failed->final_event().error, "server_error", "", "engine_error"};
  return std::nullopt;
}

// httplib::Server keeps its listening socket in a protected member; a pointer to member formed
// through a derived class reads it from any httplib::Server.
struct ListeningSocket : httplib::Server {
  static int of(const httplib::Server& s) { return (s.*(&ListeningSocket::svr_sock_)).load(); }
};

void reuse_address_only(socket_t sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// httplib reports a failed bind as -1/false, not why. Ask the OS: bind a probe socket the way
// httplib does (same getaddrinfo, SO_REUSEADDR, dual-stack for IPv6) and keep its error. When the
// probe binds (the address came free in between) the errno left by httplib's attempt is used.
std::string bind_failure_reason(const std::string& host, int port, int errno_after) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return std::string("cannot resolve the address: ") + ::gai_strerror(rc);
  std::string reason;
  bool bound = false;
  for (addrinfo* a = found; a && !bound; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      if (reason.empty()) reason = std::strerror(errno);
      continue;
    }
    reuse_address_only(fd);
    if (a->ai_family == AF_INET6) {
      int no = 0;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1) != 0) {
      if (reason.empty()) reason = std::strerror(errno);
    } else {
      bound = true;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (bound || reason.empty()) return errno_after != 0 ? std::strerror(errno_after) : "unknown reason (the address is free now)";
  return reason;
}

}  // namespace

int bind_and_listen(httplib::Server& svr, const std::string& host, int port, int backlog) {
  svr.set_socket_options(reuse_address_only);
  errno = 0;
  const int bound = port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
  const int errno_after = errno;
  const std::string where = host + ":" + std::to_string(port);
  if (bound <= 0) throw Error("cannot listen on " + where + ": " + bind_failure_reason(host, port, errno_after));
  // Linux: listen() on a socket that already listens only updates its backlog.
  if (::listen(ListeningSocket::of(svr), backlog) != 0)
    throw Error("cannot listen on " + where + ": listen(backlog " + std::to_string(backlog) + "): " + std::strerror(errno));
  return bound;
}

void log_line(const json& fields) {
  const std::string s = fields.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

HttpServer::HttpServer(GenerationService& service, Metrics& metrics, HttpOptions o)
    : service_(service), metrics_(metrics), opts_(std::move(o)), svr_(std::make_unique<httplib::Server>()) {
  const int threads = opts_.threads > 0 ? opts_.threads
                                        : service.options().engine.max_seqs + service.options().queue_limit + 16;
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  svr_->set_payload_max_length(opts_.max_body_bytes);
  svr_->set_keep_alive_max_count(1000);
  svr_->set_read_timeout(30, 0);
  svr_->set_write_timeout(30, 0);
  routes();
}

HttpServer::~HttpServer() {
  {
    std::lock_guard<std::mutex> l(ready_mu_);
    shutting_down_ = true;
  }
  ready_cv_.notify_all();
  if (ready_thread_.joinable()) ready_thread_.join();
}

int HttpServer::bind() {
  opts_.port = bind_and_listen(*svr_, opts_.host, opts_.port, opts_.listen_backlog);
  return opts_.port;
}

void HttpServer::run() { svr_->listen_after_bind(); }

void HttpServer::begin_shutdown() {
  service_.set_draining();
  readiness_.set_pending("the server is shutting down");
  {
    std::lock_guard<std::mutex> l(ready_mu_);
    shutting_down_ = true;
  }
  ready_cv_.notify_all();
  // httplib's stop() does nothing until listen has started (it checks is_running()), so a SIGTERM
  // that arrives between bind() and run() was lost and the server listened forever (found by
  // tests/cli/fault_test.cpp, SIGTERM during start-up). Wait, bounded, for the listen loop first.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!svr_->is_running() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  svr_->stop();
}

void HttpServer::start_readiness() { ready_thread_ = std::thread([this] { readiness_loop(); }); }

void HttpServer::readiness_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> l(ready_mu_);
      if (shutting_down_) return;
    }
    const auto t0 = Clock::now();
    ProbeResult r = run_readiness_probe(service_, opts_.ready_max_tokens, opts_.ready_timeout_s);
    {
      std::lock_guard<std::mutex> l(ready_mu_);
      if (shutting_down_) return;
    }
    readiness_.set(r);
    log_line({{"ts", now_iso()},
              {"event", "readiness_check"},
              {"passed", r.passed},
              {"reason", r.reason},
              {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()},
              {"degeneracy", r.report.value("degeneracy", json())},
              {"synthetic", service_.model().synthetic}});
    std::unique_lock<std::mutex> l(ready_mu_);
    if (opts_.ready_interval_s <= 0) {
      ready_cv_.wait(l, [&] { return shutting_down_; });
      return;
    }
    ready_cv_.wait_for(l, std::chrono::milliseconds(int64_t(opts_.ready_interval_s * 1000)), [&] { return shutting_down_; });
  }
}

void HttpServer::routes() {
  httplib::Server& s = *svr_;

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_record = RequestRecord{};
    if (opts_.api_key.empty() || !protected_route(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.empty()) {
      send_error(res, ApiError{401, "missing API key: send the header \"Authorization: Bearer KEY\"",
                               "invalid_request_error", "", "missing_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (auth.rfind("Bearer ", 0) != 0 || !constant_time_equal(auth.substr(7), opts_.api_key)) {
      send_error(res, ApiError{401, "incorrect API key provided", "invalid_request_error", "", "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Counted before the response is written (httplib calls the post-routing handler just before
  // the status line, the logger only after the body), so a client that reads /metrics after its
  // response came back always sees its request counted. (Counting in the logger raced with that
  // next request; the ASan CI stage lost the race.)
  s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.count_request(route_label(req.path), res.status);
  });
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    const std::string route = route_label(req.path);
    json line = {{"ts", now_iso()},
                 {"event", "request"},
                 {"method", req.method},
                 {"path", req.path},
                 {"status", res.status},
                 {"remote", req.remote_addr},
                 {"duration_s", std::chrono::duration<double>(Clock::now() - t_record.start).count()}};
    for (auto& [k, v] : t_record.fields.items()) line[k] = v;
    if (route != "/health" && route != "/metrics" && route != "/ready") log_line(line);
    t_record = RequestRecord{};
  });

  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e{res.status, "", res.status >= 500 ? "server_error" : "invalid_request_error", "", ""};
    if (res.status == 404) {
      e.message = "no route " + req.method + " " + req.path;
      e.code = "not_found";
    } else if (res.status == 413) {
      e.message = "the request body is larger than " + std::to_string(opts_.max_body_bytes) + " bytes";
      e.code = "payload_too_large";
    } else {
      e.message = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
    }
    const int status = res.status;
    send_error(res, e);
    res.status = status;
  });

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError{500, what, "server_error", "", "internal_error"});
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });

  s.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    auto [status, body] = readiness_.response();
    if (const std::string fault = service_.engine_fault(); !fault.empty()) {
      status = 503;
      body["ready"] = false;
      body["reason"] = fault;
    }
    send_json(res, status, body);
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(service_.gauges(readiness_.ready())), "text/plain; version=0.0.4; charset=utf-8");
  });

  auto model_object = [this] {
    const ServedModel& m = service_.model();
    json g = m.describe();
    g["engine"] = {{"max_seqs", service_.options().engine.max_seqs},
                   {"max_context", service_.limits().max_context},
                   {"queue_limit", service_.options().queue_limit},
                   {"kv_dtype", kv_dtype_name(service_.options().engine.kv.dtype)},
                   {"prefix_cache_bytes", service_.options().engine.prefix_cache_bytes},
                   {"stop_on_degenerate", service_.options().stop_on_degenerate},
                   {"request_timeout_s", service_.options().request_timeout_s}};
    return json{{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "g4"},
                {"max_model_len", service_.limits().max_context}, {"g4", g}};
  };
  s.Get("/v1/models", [model_object](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
  });
  s.Get(R"(/v1/models/(.+))", [this, model_object](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != service_.model().id)
      return send_error(res, ApiError{404, "the model '" + id + "' does not exist", "invalid_request_error", "model",
                                      "model_not_found"});
    send_json(res, 200, model_object());
  });

  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_json_object(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    const json& b = std::get<json>(parsed);
    if (b.contains("model") && !b["model"].is_null() && b["model"] != service_.model().id)
      return send_error(res, ApiError{404, "the model '" + b["model"].dump() + "' does not exist", "invalid_request_error",
                                      "model", "model_not_found"});
    std::vector<int> ids;
    if (b.contains("messages")) {
      json body = b;
      body["model"] = service_.model().id;
      auto spec = parse_chat_request(body, service_.limits());
      if (auto* e = std::get_if<ApiError>(&spec)) return send_error(res, *e);
      auto enc = service_.encode_prompt(std::get<GenerationSpec>(spec));
      if (auto* e = std::get_if<ApiError>(&enc)) {
        if (e->code != "context_length_exceeded") return send_error(res, *e);
        // Counting tokens of a too-long prompt is a fine use of /tokenize.
        for (int32_t id : encode_chat_prompt(service_.model(), std::get<GenerationSpec>(spec).messages,
                                             std::get<GenerationSpec>(spec).tools, false))
          ids.push_back(id);
      } else {
        ids = std::get<std::vector<int>>(enc);
      }
    } else {
      auto p = b.find("prompt");
      if (p == b.end()) return send_error(res, bad_request("'prompt' (a string) or 'messages' is required", "prompt", "missing_required_field"));
      if (!p->is_string()) return send_error(res, bad_request("'prompt' must be a string", "prompt", "invalid_type"));
      bool add_special = true;
      if (auto a = b.find("add_special_tokens"); a != b.end() && !a->is_null()) {
        if (!a->is_boolean()) return send_error(res, bad_request("'add_special_tokens' must be a boolean", "add_special_tokens", "invalid_type"));
        add_special = a->get<bool>();
      }
      text::EncodeOptions eo;
      eo.add_bos = add_special;
      for (int32_t id : service_.model().tokenizer->encode(p->get<std::string>(), eo)) ids.push_back(id);
    }
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", service_.limits().max_context}});
  });

  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_json_object(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    const json& b = std::get<json>(parsed);
    auto t = b.find("tokens");
    if (t == b.end()) return send_error(res, bad_request("'tokens' is required", "tokens", "missing_required_field"));
    if (!t->is_array()) return send_error(res, bad_request("'tokens' must be an array of token ids", "tokens", "invalid_type"));
    std::vector<int32_t> ids;
    const int vocab = service_.model().tokenizer->vocab().size();
    for (const auto& v : *t) {
      if (!v.is_number_integer()) return send_error(res, bad_request("'tokens' must be an array of token ids", "tokens", "invalid_type"));
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= vocab)
        return send_error(res, bad_request("token id " + std::to_string(id) + " is outside the tokenizer's vocabulary [0, " +
                                               std::to_string(vocab) + ")",
                                           "tokens", "invalid_value"));
      ids.push_back(int32_t(id));
    }
    send_json(res, 200, {{"prompt", service_.model().tokenizer->decode(ids)}});
  });

  auto generate = [this](Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_json_object(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    const json& body = std::get<json>(parsed);
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

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [active, builder, service, deadline_error](size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
          for (const json& c : builder->opening_chunks())
            if (!write(sse_event(c))) return false;
          GenerationEvent ev;
          while (!builder->finished()) {
            const auto now = Clock::now();
            if (now >= active->deadline) {
              expire(*service, *active, *builder);
              t_record.fields["deadline_exceeded"] = true;
              t_record.fields["error"] = deadline_error.message;
              write(sse_event(error_body(deadline_error)));
              write(sse_done());
              sink.done();
              return true;
            }
            if (!active->pop(ev, std::min(active->deadline, now + std::chrono::seconds(1)))) {
              // Idle (queued or slow prefill): an SSE comment keeps proxies open and finds a client
              // that went away.
              if (!write(": keep-alive\n\n")) {
                t_record.fields["client_disconnected"] = true;
                return false;
              }
              continue;
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
            const ApiError e{500, "generation failed: " + failed->final_event().error, "server_error", "", "engine_error"};
            t_record.fields["error"] = e.message;
            write(sse_event(error_body(e)));
          }
          write(sse_done());
          sink.done();
          return true;
        },
        [active, builder, service](bool) {
          // The connection ended before the generation did (client gone, write failed): cancel it
          // so its sequence and KV cache are freed at the next engine step.
          if (!builder->finished()) service->cancel(active->engine_id);
        });
  };
  s.Post("/v1/chat/completions",
         [generate](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::chat, req, res); });
  s.Post("/v1/completions",
         [generate](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::completion, req, res); });
  s.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) { responses(req, res); });
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
  auto rr_or = responses_to_chat(std::get<json>(parsed), stored_responses_);
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
  ResponseStore* store = &stored_responses_;
  auto remember = [rr, chat, store, id = ctx.id] {
    if (!rr->store) return;
    json conversation = rr->conversation;
    for (auto& m : ResponsesBuilder::output_as_messages(*chat)) conversation.push_back(m);
    store->put(id, std::move(conversation));
  };
  const ApiError deadline_error = deadline_error_of(*active);
  if (!rr->stream) {
    if (auto e = await_all(*service, *active, *chat)) return send_error(res, *e);
    remember();
    return send_json(res, 200, out->final_object(*chat));
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [active, chat, out, service, deadline_error, remember](size_t, httplib::DataSink& sink) {
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
        while (!chat->finished()) {
          const auto now = Clock::now();
          if (now >= active->deadline) {
            expire(*service, *active, *chat);
            t_record.fields["deadline_exceeded"] = true;
            return fail(deadline_error);
          }
          if (!active->pop(ev, std::min(active->deadline, now + std::chrono::seconds(1)))) {
            if (!sink.write(": keep-alive\n\n", 14)) {
              t_record.fields["client_disconnected"] = true;
              return false;
            }
            continue;
          }
          if (!write(out->on_chat_chunks(chat->on_event(ev)))) {
            t_record.fields["client_disconnected"] = true;
            return false;
          }
        }
        record_generation(*chat, true);
        if (const ResponseBuilder* failed = chat->failed())
          return fail(ApiError{500, "generation failed: " + failed->final_event().error, "server_error", "", "engine_error"});
        remember();
        write(out->finish(*chat));
        sink.done();
        return true;
      },
      [active, chat, service](bool) {
        if (!chat->finished()) service->cancel(active->engine_id);
      });
}

}  // namespace g4::server
