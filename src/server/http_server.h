// The HTTP layer: routes, auth, SSE streaming, the per-request log line and the readiness loop,
// on cpp-httplib. All OpenAI mapping is delegated to the pure functions in openai_request.h and
// openai_response.h; all generation goes through GenerationService.
//
// Routes (those marked * need "Authorization: Bearer KEY" when --api-key is set):
//   POST /v1/chat/completions*  POST /v1/completions*  POST /v1/responses*  GET /v1/models*  GET /v1/models/{id}*
//   POST /tokenize*  POST /detokenize*  GET /health  GET /ready  GET /metrics
//
// Files: http_server.cpp (lifetime, readiness loop, the route groups and the small handlers),
// http_generation.cpp (the generating routes, whole or streamed), http_listen.cpp (binding),
// http_reply.h (the replies and the log record every handler shares).
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "server/generation_service.h"
#include "server/metrics.h"
#include "server/readiness.h"
#include "server/responses_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace g4::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the chosen one is logged)
  std::string api_key;
  size_t max_body_bytes = 8u << 20;
  int threads = 0;                 // 0: max_seqs + queue + 16
  int listen_backlog = 4096;       // accept queue length (the kernel caps it at net.core.somaxconn)
  double ready_interval_s = 300;   // re-check period; 0 = only at startup
  int ready_max_tokens = 32;
  double ready_timeout_s = 600;
};

class HttpServer {
 public:
  HttpServer(GenerationService& service, Metrics& metrics, HttpOptions options);
  ~HttpServer();

  int bind();            // binds host:port; returns the port (throws g4::Error on failure)
  void start_readiness();
  void run();            // serves until begin_shutdown(); returns once in-flight requests finished
  void begin_shutdown(); // stop accepting, refuse new generations (503), let running ones finish
  ReadinessState& readiness() { return readiness_; }

 private:
  // routes() registers every handler, one group at a time:
  void routes();
  void route_access_and_logging();  // API key check, the metrics count and the log line
  void route_errors();              // error bodies for unrouted / oversized requests and exceptions
  void route_probes();              // GET /health, /ready, /metrics
  void route_models();              // GET /v1/models, /v1/models/{id}
  void route_tokenizer();           // POST /tokenize, /detokenize
  void route_generation();          // POST /v1/chat/completions, /v1/completions, /v1/responses (http_generation.cpp)

  nlohmann::json model_object() const;  // the served model as /v1/models lists it
  void tokenize(const httplib::Request& req, httplib::Response& res);
  std::variant<std::vector<int>, ApiError> tokens_of_messages(const RequestJson& body) const;  // its chat prompt
  std::variant<std::vector<int>, ApiError> tokens_of_prompt(const RequestJson& body) const;
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);  // chat and completions
  void responses(const httplib::Request& req, httplib::Response& res);                   // POST /v1/responses
  // The response's context for a started spec; also records its id and model in the log line.
  ResponseContext response_context(const GenerationSpec& spec, Endpoint endpoint, const std::string& id_prefix) const;
  void readiness_loop();

  GenerationService& service_;
  Metrics& metrics_;
  HttpOptions opts_;
  std::unique_ptr<httplib::Server> svr_;
  ReadinessState readiness_;
  ResponseStore stored_responses_;  // previous_response_id
  std::thread ready_thread_;
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  bool shutting_down_ = false;
};

// Binds svr to host:port (port 0: any free port) and returns the bound port, listening with
// `backlog` pending connections. cpp-httplib 0.11 listens with a backlog of 5, so a burst of
// connects overflows the accept queue while its accept thread is busy (the kernel drops the SYNs
// and the clients stall for a 1 s retransmission, or are reset); this listens a second time on
// the same socket, which on Linux only sets the new backlog. The socket gets SO_REUSEADDR only:
// httplib's default also sets SO_REUSEPORT, with which a second server binds the same port and
// silently shares its connections. Throws g4::Error "cannot listen on HOST:PORT: REASON", with
// the OS reason (e.g. "Address already in use").
int bind_and_listen(httplib::Server& svr, const std::string& host, int port, int backlog);

// One structured log line (JSON) on stderr.
void log_line(const nlohmann::json& fields);

}  // namespace g4::server
