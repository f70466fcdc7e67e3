// g4 serve: the OpenAI-compatible HTTP server (src/server/) over the engine.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/image_args.h"
#include "cli/model_arg.h"
#include "cli/speculative_args.h"
#include "ops/matmul/dot_kernels.h"
#include "platform/device.h"
#include "platform/dtype_policy.h"
#include "platform/error.h"
#include "server/generation_service.h"
#include "server/http_server.h"
#include "cli/compute_choice.h"
#include "cli/device_choice.h"
#include "cli/weights_at_load.h"
#include "engine/engine.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/weight_placement.h"
#include "ops/matmul/matmul.h"
#include "platform/thread_pool.h"
#include "server/served_model.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 serve --model MODEL [--tokenizer FILE] [--host 127.0.0.1] [--port 8080] [--api-key KEY]\n"
    "                [--max-seqs N] [--ctx N] [--queue N] [--name ID] [--kv f32|f16|bf16|int8]\n"
    "                [--max-tokens-default N] [--request-timeout S] [--drain-timeout S] [--max-body BYTES]\n"
    "                [--ready-interval S] [--ready-tokens N] [--threads N] [--stop-on-degenerate]\n"
    "                [--listen-backlog N] [--weight-memory auto|huge|mapped] [--compute f32|bf16]\n"
    "                [--weights q8|q4] [--prefix-cache-mb N] [--speculative off|ngram|draft] [--draft-k N]\n"
    "                [--draft-model PATH] [--draft-p-min P] [--mmproj FILE] [--image-tokens N]\n"
    "                [--device cpu|vulkan[:N]|auto]\n"
    "                [--allowed-media-domains HOSTS] [--max-image-bytes N] [--media-timeout S]\n"
    "                [--image-cache-mb N]\n\n"
    "Serves the model over HTTP in the OpenAI wire format (see README, \"Serving\"):\n"
    "  POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize; GET /v1/models,\n"
    "  /health (liveness), /ready (200 once a real generation through the whole path passed its\n"
    "  content checks), /metrics (Prometheus).\n\n"
    "  --host H             address to bind (default 127.0.0.1: this machine only)\n"
    "  --port P             port (default 8080; 0 picks a free one, printed in the 'listening' log line)\n"
    "  --api-key KEY        require \"Authorization: Bearer KEY\" on /v1/*, /tokenize, /detokenize\n"
    "                       (also read from $G4_API_KEY); /health, /ready, /metrics stay open\n"
    "  --max-seqs N         sequences decoding at once (default 8)\n"
    "  --ctx N              context per sequence, prompt + completion (default 4096, capped by the model)\n"
    "  --queue N            requests waiting for a slot before 429 + Retry-After (default 64)\n"
    "  --name ID            the model id clients send (default: the model directory's name, or the\n"
    "                       repo id as given when MODEL is one)\n"
    "  --request-timeout S  per-request deadline in seconds (default 600); 504 / SSE error when passed\n"
    "  --drain-timeout S    on SIGTERM/SIGINT, how long in-flight requests may finish (default 30)\n"
    "  --max-body BYTES     largest request body (default 8388608); larger gets 413\n"
    "  --ready-interval S   re-run the readiness self-check this often (default 300; 0 = startup only)\n"
    "  --threads N          SIMD kernels on N threads (default: all cores); 0: the f32 reference loops\n"
    "  --kv DTYPE           KV cache storage (default: the dtype policy's, see `g4 info`; f32 with\n"
    "                       --threads 0)\n"
    "  --stop-on-degenerate end a sequence early when the degeneracy guard is certain it loops\n"
    "  --listen-backlog N   connections the kernel queues before the server accepts them (default 4096,\n"
    "                       capped by net.core.somaxconn)\n"
    "  --weight-memory M    auto (default): copy the streamed weight matrices into 2 MiB huge pages\n"
    "                       when THP is on and they fit in MemAvailable; huge: always; mapped: never\n"
    "  --compute f32|bf16   compute dtype (default: the device policy; bf16 where the CPU has\n"
    "                       confirmed AVX512_BF16 and the weights are bf16; see `g4 info`; f32 also\n"
    "                       keeps activations f32 for q8/q4 weights instead of int8 products on VNNI)\n"
    "  --prefix-cache-mb N  keep finished conversations' KV up to N MiB (default 1024; 0: off), so a\n"
    "                       request that starts with cached tokens prefills only the rest, with the\n"
    "                       same logits (usage.prompt_tokens_details.cached_tokens says how many)\n"
    "  --weights q8|q4      re-encode the weight matrices as Q8_0 / Q4_0 in memory at load; the startup\n"
    "                       line and /v1/models report the time and how far the logits moved on an\n"
    "                       8-token probe (the checkpoint's weights with f32 compute against the\n"
    "                       path the server runs)\n") +
    kSpeculativeHelp +
    "                       (a request may choose with {\"g4\": {\"speculative\": M, \"draft_k\": K}}; the\n"
    "                       response's g4.speculative gives its acceptance per draft position)\n" +
    "Images (chat image_url parts, Responses input_image parts; the model needs a vision tower):\n"
    "  --mmproj FILE        the vision tower from a llama.cpp mmproj GGUF (projector type gemma4v)\n"
    "  --image-tokens N     soft tokens of an image part without detail: 70, 140, 280, 560 or 1120\n"
    "                       (default: the tower's, 280); detail low = 70, high = 1120;\n"
    "                       {\"g4\": {\"max_image_tokens\": N}} sets it per request\n"
    "  --allowed-media-domains HOSTS  comma-separated host names whose http(s) image URLs are fetched\n"
    "                       (default none: only data: URLs); redirects must stay on the list\n"
    "  --max-image-bytes N  largest fetched image (default 20971520)\n"
    "  --media-timeout S    time limit of one image fetch, redirects included (default 10)\n"
    "  --image-cache-mb N   keep recent images' soft tokens up to N MiB (default 64; 0: off), so an\n"
    "                       image sent again skips the vision tower even where the prefix cache missed\n" +
    kDeviceHelp + kModelHelp;

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// --threads: 0 runs the f32 reference loops.
int serve_threads(const Args& a) {
  const int threads = int(a.get_int("--threads", int(std::max(1u, std::thread::hardware_concurrency()))));
  if (threads < 0) throw Error("--threads must be >= 0");
  return threads;
}

// --max-seqs, --ctx (capped by the model) and --chunk, and the batch they imply.
void set_engine_sizes(const Args& a, const Model& m, EngineOptions& e) {
  e.max_seqs = int(a.get_int("--max-seqs", 8));
  if (e.max_seqs < 1 || e.max_seqs > 1024) throw Error("--max-seqs must be in 1..1024");
  const int64_t ctx = a.get_int("--ctx", 4096);
  if (ctx < 16) throw Error("--ctx must be at least 16");
  e.max_context = std::min<int64_t>(ctx, m.config.max_position_embeddings);
  const SpeculativeSetup spec = speculative_setup(a, m);
  e.speculative = spec.options;
  e.min_matmul_input = spec.min_matmul_input;
  e.prefill_chunk = a.get_int("--chunk", 256);
  e.max_batch_tokens = std::max<int64_t>(e.prefill_chunk, e.max_seqs) + e.max_seqs;
  // Drafts take their rows from the same budget, ahead of prompt chunks: room for them too.
  if (e.speculative.mode != SpecMode::Off) e.max_batch_tokens += int64_t(e.max_seqs) * e.speculative.k_max;
}

// Placement (--weight-memory) and the kernels' interleaved layouts, noted for the startup line.
void place_weights_for_serving(const Args& a, const ComputeChoice& compute, int threads, server::ServedModel& model) {
  ThreadPool pool(threads);
  const PlacementReport placed =
      place_weights(*model.model, weight_memory_from_flag(a.get_or("--weight-memory", "auto")), &pool);
  model.notes.push_back("weights: " + describe_placement(placed));
  const std::string interleaved = describe_interleave(prepare_weights(compute, *model.model, &pool));
  if (!interleaved.empty()) model.notes.push_back("weights: " + interleaved);
}

// --weights: the probe on the path the engine will run, and the result as a startup note.
void finish_weights_for_serving(WeightsAtLoad& requant, const ComputeChoice& compute, int threads,
                                server::ServedModel& model) {
  ThreadPool pool(std::max(1, threads));
  const ops::MatmulContext mm = ops::make_matmul_context(&pool, host_cpu(), model.model->config.widest_matmul_input(),
                                                         compute.bf16, compute.int8);
  blocks::Exec ex;
  if (threads > 0) ex.matmul = &mm;
  finish_weights_at_load(requant, *model.model, pool, ex, nullptr);
  char line[256];
  std::snprintf(line, sizeof line, "%d matrices re-encoded, %.1f -> %.1f MiB in %.2f s", requant.requantized.tensors,
                double(requant.requantized.bytes_before) / (1 << 20), double(requant.requantized.bytes_after) / (1 << 20),
                requant.requantized.seconds);
  model.notes.push_back("weights: --weights " + requant.flag + ": " + line + "; logits on a probe of " +
                        std::to_string(requant.probe.size()) + " tokens against the checkpoint's weights (f32 compute): " +
                        describe_logit_shift(requant.shift));
}

// After placement and interleaving: the path the products and the attention really take.
std::string describe_forward(const ComputeChoice& compute, const EngineOptions& e, const Model& m) {
  const ops::MatmulContext described =
      ops::make_matmul_context(nullptr, host_cpu(), m.config.widest_matmul_input(), compute.bf16, compute.int8);
  if (e.threads == 0) return "f32 reference loops (--threads 0)";
  return ops::describe_matmul(described, m.weights.layers[0].q_proj->dtype) + " on " + std::to_string(e.threads) +
         " threads; attention: " + describe_attention(kv_span_element(e.kv.dtype), blocks::Exec{&described});
}

// The cache for every sequence at full context, the prefix cache (--prefix-cache-mb, returned),
// the queue and the per-request limits.
int64_t set_cache_and_requests(const Args& a, server::ServiceOptions& so) {
  EngineOptions& e = so.engine;
  e.kv.max_total_tokens = (e.max_context * e.max_seqs + e.kv.block_tokens) / e.kv.block_tokens * e.kv.block_tokens;
  const int64_t prefix_mb = a.get_int("--prefix-cache-mb", 1024);
  if (prefix_mb < 0 || prefix_mb > (int64_t(1) << 20)) throw Error("--prefix-cache-mb must be in 0..1048576");
  e.prefix_cache_bytes = uint64_t(prefix_mb) << 20;
  const int64_t image_mb = a.get_int("--image-cache-mb", 64);
  if (image_mb < 0 || image_mb > (int64_t(1) << 20)) throw Error("--image-cache-mb must be in 0..1048576");
  e.image_cache_bytes = uint64_t(image_mb) << 20;
  so.queue_limit = int(a.get_int("--queue", 64));
  if (so.queue_limit < 0) throw Error("--queue must be >= 0");
  so.request_timeout_s = a.get_double("--request-timeout", 600);
  so.stop_on_degenerate = a.has("--stop-on-degenerate");
  so.default_max_tokens = int(std::min<int64_t>(a.get_int("--max-tokens-default", 512), e.max_context - 1));
  return prefix_mb;
}

// Image parts: the default budget, and which remote hosts may be fetched, how much and how long.
server::ImageOptions image_options(const Args& a, const server::ServedModel& model) {
  server::ImageOptions o;
  if (a.has("--image-tokens")) {
    if (!model.vision) throw Error("--image-tokens: the model has no vision tower");
    o.default_budget = image_tokens_flag(a, model.vision->config);
  }
  const std::string hosts = a.get_or("--allowed-media-domains", "");
  for (size_t b = 0; b < hosts.size();) {
    size_t e = hosts.find(',', b);
    if (e == std::string::npos) e = hosts.size();
    if (e > b) o.fetch.allowed_hosts.push_back(hosts.substr(b, e - b));
    b = e + 1;
  }
  const auto max_bytes = a.get_int("--max-image-bytes", int64_t(o.fetch.max_bytes));
  if (max_bytes < 1) throw Error("--max-image-bytes must be >= 1");
  o.fetch.max_bytes = uint64_t(max_bytes);
  o.fetch.timeout_s = a.get_double("--media-timeout", o.fetch.timeout_s);
  if (!(o.fetch.timeout_s > 0)) throw Error("--media-timeout must be > 0");
  return o;
}

server::HttpOptions http_options(const Args& a) {
  server::HttpOptions ho;
  ho.host = a.get_or("--host", "127.0.0.1");
  ho.port = int(a.get_int("--port", 8080));
  ho.api_key = a.get_or("--api-key", "");
  if (ho.api_key.empty())
    if (const char* k = std::getenv("G4_API_KEY")) ho.api_key = k;
  ho.max_body_bytes = size_t(a.get_int("--max-body", 8 << 20));
  ho.ready_interval_s = a.get_double("--ready-interval", 300);
  ho.ready_max_tokens = int(a.get_int("--ready-tokens", 32));
  ho.listen_backlog = int(a.get_int("--listen-backlog", ho.listen_backlog));
  if (ho.listen_backlog < 1 || ho.listen_backlog > 65535) throw Error("--listen-backlog must be in 1..65535");
  return ho;
}

nlohmann::json listening_line(const server::ServedModel& model, const server::ServiceOptions& so,
                              const server::HttpOptions& ho, int port, double load_s, int64_t prefix_mb) {
  return {{"event", "listening"},
          {"host", ho.host},
          {"port", port},
          {"model", model.id},
          {"load_s", load_s},
          {"auth", ho.api_key.empty() ? "none" : "bearer"},
          {"max_seqs", so.engine.max_seqs},
          {"ctx", so.engine.max_context},
          {"queue", so.queue_limit},
          {"listen_backlog", ho.listen_backlog},
          {"prefix_cache_mb", prefix_mb},
          {"speculative", speculative_json(so.engine.speculative)},
          {"dtype_policy", policy_to_json(model.policy)},
          {"device", host_cpu().name},
          {"synthetic", model.synthetic},
          {"missing_template_tokens", model.missing_template_tokens},
          {"images", model.images_refused.empty()
                         ? nlohmann::json{{"tower", model.vision->format}, {"default_tokens", so.images.default_budget > 0 ? so.images.default_budget : model.vision->config.default_image_budget()},
                                          {"allowed_media_domains", so.images.fetch.allowed_hosts}}
                         : nlohmann::json(model.images_refused)},
          {"notes", model.notes}};
}

// Serves until SIGTERM/SIGINT, then lets in-flight requests finish for up to drain_s seconds
// before cancelling them.
void serve_until_signalled(const sigset_t& sigs, server::GenerationService& service, server::HttpServer& http,
                           double drain_s) {
  std::atomic<bool> serving{true};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (!serving) return;  // woken by main after the server stopped on its own
    server::log_line({{"event", "shutdown"}, {"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
                      {"in_flight", service.in_flight()}, {"drain_timeout_s", drain_s}});
    http.begin_shutdown();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(drain_s * 1000));
    while (service.in_flight() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (service.in_flight() > 0) {
      server::log_line({{"event", "drain_timeout"}, {"cancelled", service.in_flight()}});
      service.cancel_all();
    }
  });
  http.start_readiness();
  http.run();  // returns after begin_shutdown() once every handler has finished
  serving = false;
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // no-op for sigwait if it already returned
  signal_thread.join();
}

int run(const std::vector<std::string>& argv) {
  Args a(argv,
         with_speculative_flags({"--model", "--tokenizer", "--host", "--port", "--api-key", "--max-seqs", "--ctx", "--queue",
                                 "--name", "--kv", "--max-tokens-default", "--request-timeout", "--drain-timeout",
                                 "--max-body", "--ready-interval", "--ready-tokens", "--chunk", "--threads",
                                 "--listen-backlog", "--weight-memory", "--compute", "--weights", "--prefix-cache-mb",
                                 "--mmproj", "--device", "--image-tokens", "--allowed-media-domains", "--max-image-bytes",
                                 "--media-timeout", "--image-cache-mb"}),
         {"--stop-on-degenerate"});
  // Shutdown signals go to one thread (sigwait); every thread started from here inherits the mask.
  sigset_t sigs = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

  const auto t0 = std::chrono::steady_clock::now();
  const ModelArg arg = model_arg(a.require("--model"));
  server::ServedModel model =
      server::ServedModel::load(arg.path, a.get_or("--tokenizer", ""), a.get_or("--name", arg.cache ? arg.cache->spec : ""),
                                a.get_or("--mmproj", ""));

  server::ServiceOptions so;
  EngineOptions& e = so.engine;
  e.threads = serve_threads(a);
  std::optional<WeightsAtLoad> requant;
  if (a.has("--weights")) {
    ThreadPool pool(std::max(1, e.threads));
    requant = start_weights_at_load(a, *model.model, pool, nullptr);
  }
  set_engine_sizes(a, *model.model, e);
  const ComputeChoice compute = resolve_compute(a, *model.model);
  model.policy = compute.policy;
  e.bf16_compute = compute.bf16;
  e.int8_activations = compute.int8;
  e.kv.dtype = resolve_kv(a, compute, e.threads == 0);
  const DeviceRun device = attach_device(a, *model.model, e, "");
  std::fprintf(stderr, "[g4 serve] %s\n", device.line.c_str());
  if (!device.forward) {
    if (e.threads > 0) place_weights_for_serving(a, compute, e.threads, model);
    if (requant) finish_weights_for_serving(*requant, compute, e.threads, model);
    prepare_vision_kernels(model.vision.get(), e, "[g4 serve]");
    model.forward = describe_forward(compute, e, *model.model);
  } else {
    model.forward = device.line.substr(7);  // without "device "
    model.gpu_device = device.label;
    model.gpu_policy = device.policy;
    if (model.vision) {  // the tower runs on the CPU kernels only: image parts are refused by name
      model.vision.reset();
      model.notes.push_back("images: refused on " + device.label + " (the vision tower runs with --device cpu)");
    }
  }
  const int64_t prefix_mb = set_cache_and_requests(a, so);
  so.images = image_options(a, model);
  const server::HttpOptions ho = http_options(a);
  const double drain_s = a.get_double("--drain-timeout", 30);

  server::Metrics metrics;
  server::GenerationService service(model, so, metrics);
  server::HttpServer http(service, metrics, ho);
  const int port = http.bind();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json listening = listening_line(model, so, ho, port, load_s, prefix_mb);
  if (arg.cache)  // which snapshot a repo id resolved to, for whoever reads the log
    listening["source"] = {{"repo", arg.cache->repo}, {"revision", arg.cache->revision}, {"commit", arg.cache->commit},
                           {"path", arg.cache->path.string()}, {"cache", arg.cache->root.path.string()}};
  server::log_line(listening);
  std::fprintf(stderr, "%s", describe_policy(model.policy).c_str());
  std::fflush(stderr);
  serve_until_signalled(sigs, service, http, drain_s);
  server::log_line({{"event", "stopped"}});
  return 0;
}

const Registration reg{"serve", "OpenAI-compatible HTTP server (chat, completions, SSE, /ready, /metrics)", kUsage, run};

}  // namespace
}  // namespace g4::cli
