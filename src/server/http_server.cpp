#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "server/http_reply.h"

namespace g4::server {

using nlohmann::json;

namespace {

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

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
  return diff == 0;
}

bool protected_route(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

}  // namespace

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
  route_access_and_logging();
  route_errors();
  route_probes();
  route_models();
  route_tokenizer();
  route_generation();
}

void HttpServer::route_access_and_logging() {
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
  // response came back always sees its request counted.
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
}

void HttpServer::route_errors() {
  httplib::Server& s = *svr_;

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
}

void HttpServer::route_probes() {
  httplib::Server& s = *svr_;

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
}

json HttpServer::model_object() const {
  const ServedModel& m = service_.model();
  json g = m.describe();
  g["engine"] = {{"max_seqs", service_.options().engine.max_seqs},
                 {"max_context", service_.limits().max_context},
                 {"queue_limit", service_.options().queue_limit},
                 {"kv_dtype", kv_dtype_name(service_.options().engine.kv.dtype)},
                 {"prefix_cache_bytes", service_.options().engine.prefix_cache_bytes},
                 {"image_cache_bytes", service_.options().engine.image_cache_bytes},
                 {"speculative",
                  {{"mode", spec_mode_name(service_.options().engine.speculative.mode)},
                   {"k_max", service_.options().engine.speculative.k_max},
                   {"draft_model", service_.options().engine.speculative.drafter_name}}},
                 {"stop_on_degenerate", service_.options().stop_on_degenerate},
                 {"request_timeout_s", service_.options().request_timeout_s}};
  return json{{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "g4"},
              {"max_model_len", service_.limits().max_context}, {"g4", g}};
}

void HttpServer::route_models() {
  httplib::Server& s = *svr_;
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != service_.model().id)
      return send_error(res, ApiError{404, "the model '" + id + "' does not exist", "invalid_request_error", "model",
                                      "model_not_found"});
    send_json(res, 200, model_object());
  });
}

void HttpServer::route_tokenizer() {
  httplib::Server& s = *svr_;
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
}

std::variant<std::vector<int>, ApiError> HttpServer::tokens_of_messages(const RequestJson& b) const {
  RequestJson body = b;
  body["model"] = service_.model().id;
  auto spec = parse_chat_request(body, service_.limits());
  if (auto* e = std::get_if<ApiError>(&spec)) return *e;
  auto enc = service_.encode_prompt(std::get<GenerationSpec>(spec));
  if (auto* e = std::get_if<ApiError>(&enc)) {
    if (e->code != "context_length_exceeded") return *e;
    // Counting tokens of a too-long prompt is a fine use of /tokenize.
    std::vector<int> ids;
    for (int32_t id : encode_chat_prompt(service_.model(), std::get<GenerationSpec>(spec).messages,
                                         std::get<GenerationSpec>(spec).tools, false))
      ids.push_back(id);
    return ids;
  }
  return std::get<std::vector<int>>(enc);
}

std::variant<std::vector<int>, ApiError> HttpServer::tokens_of_prompt(const RequestJson& b) const {
  auto p = b.find("prompt");
  if (p == b.end()) return bad_request("'prompt' (a string) or 'messages' is required", "prompt", "missing_required_field");
  if (!p->is_string()) return bad_request("'prompt' must be a string", "prompt", "invalid_type");
  bool add_special = true;
  if (auto a = b.find("add_special_tokens"); a != b.end() && !a->is_null()) {
    if (!a->is_boolean()) return bad_request("'add_special_tokens' must be a boolean", "add_special_tokens", "invalid_type");
    add_special = a->get<bool>();
  }
  text::EncodeOptions eo;
  eo.add_bos = add_special;
  std::vector<int> ids;
  for (int32_t id : service_.model().tokenizer->encode(p->get<std::string>(), eo)) ids.push_back(id);
  return ids;
}

void HttpServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_json_object(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const RequestJson& b = std::get<RequestJson>(parsed);
  if (b.contains("model") && !b["model"].is_null() && b["model"] != service_.model().id)
    return send_error(res, ApiError{404, "the model '" + b["model"].dump() + "' does not exist", "invalid_request_error",
                                    "model", "model_not_found"});
  auto ids = b.contains("messages") ? tokens_of_messages(b) : tokens_of_prompt(b);
  if (auto* e = std::get_if<ApiError>(&ids)) return send_error(res, *e);
  const std::vector<int>& tokens = std::get<std::vector<int>>(ids);
  send_json(res, 200, {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", service_.limits().max_context}});
}

void HttpServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_json_object(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const RequestJson& b = std::get<RequestJson>(parsed);
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
}

}  // namespace g4::server
