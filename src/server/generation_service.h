// The bridge between HTTP handler threads and the engine: one dedicated thread loops
// Engine::step() (sleeping on a condition variable when idle, woken by submit); a handler encodes
// its prompt, submits, and then waits on its own ActiveRequest queue for the events the engine
// thread pushes. Also enforces the waiting-queue bound (429), draining (503) and feeds metrics.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <variant>

#include "engine/engine.h"
#include "server/image_input.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "engine/grammar_matcher.h"
#include "server/served_model.h"

namespace g4::server {

using Clock = std::chrono::steady_clock;

// One submitted request's event queue (filled on the engine thread, drained by its handler).
class ActiveRequest {
 public:
  int engine_id = 0;
  size_t prompt_tokens = 0;
  Clock::time_point submitted;
  Clock::time_point deadline;

  // Waits until an event is available or `until` passes. False on timeout.
  bool pop(GenerationEvent& out, Clock::time_point until);
  void push(GenerationEvent ev);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
};

struct ServiceOptions {
  EngineOptions engine;
  int queue_limit = 64;            // waiting requests before 429
  double request_timeout_s = 600;  // per-request deadline
  bool stop_on_degenerate = false;
  int default_max_tokens = 512;
  ImageOptions images;             // remote hosts, limits and the default budget of image parts
};

class GenerationService {
 public:
  GenerationService(const ServedModel& model, ServiceOptions options, Metrics& metrics);
  ~GenerationService();  // stops the engine thread (cancelling whatever still runs)

  const RequestLimits& limits() const { return limits_; }
  const ServiceOptions& options() const { return opts_; }
  const ServedModel& model() const { return model_; }

  // Encodes, checks and submits. `count_metrics` false for the readiness probe.
  std::variant<std::shared_ptr<ActiveRequest>, ApiError> start(const GenerationSpec& spec, bool count_metrics = true);
  // Prompt ids for a validated spec (or the error naming what is wrong with the prompt).
  std::variant<std::vector<int>, ApiError> encode_prompt(const GenerationSpec& spec) const;
  // The grammar that constrains a spec's output (response_format, grammar, forced tool_choice),
  // bound to the tokenizer; null when none. Compiled grammars are kept (a few, by text) so a
  // repeated schema reuses its cached masks.
  std::variant<std::shared_ptr<grammar::CompiledGrammar>, ApiError> grammar_for(const GenerationSpec& spec);
  // The stop tokens every request gets (the model's own), for response building.
  const std::vector<int>& stop_token_ids() const { return stop_ids_; }

  void cancel(int engine_id);
  void cancel_all();
  void set_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  int in_flight() const;
  MetricGauges gauges(bool ready) const;
  // The engine thread hit an exception in step(); empty when healthy.
  std::string engine_fault() const;

 private:
  void loop();
  // The steps of start(): the engine request of a spec (prompt, sampling, grammar), the callback
  // that feeds `active` and the metrics on the engine thread, and the admission (429, 503) and
  // submission under mu_, which sets active.engine_id.
  std::variant<GenerationRequest, ApiError> engine_request(const GenerationSpec& spec);
  EventCallback event_callback(std::shared_ptr<ActiveRequest> active, int n, bool count_metrics);
  std::optional<ApiError> submit(GenerationRequest req, EventCallback cb, ActiveRequest& active);

  const ServedModel& model_;
  ServiceOptions opts_;
  Metrics& metrics_;
  RequestLimits limits_;
  std::vector<int> stop_ids_;
  Engine engine_;
  uint64_t kv_capacity_bytes_ = 0;

  // Lock order: mu_ may be held while calling into the engine; engine callbacks (which run under
  // the engine's own lock) only take active_mu_, an ActiveRequest's lock and the metrics lock.
  mutable std::mutex mu_;  // serializes the queue check with submit; guards work_, stop_, fault_
  std::condition_variable wake_;
  bool work_ = false;
  bool stop_ = false;
  std::string fault_;
  mutable std::mutex active_mu_;
  std::set<int> active_;          // submitted, not finished
  std::set<int> finished_early_;  // finished before start() recorded them
  std::atomic<bool> draining_{false};
  std::mutex grammar_mu_;
  std::shared_ptr<const grammar::GrammarVocab> grammar_vocab_;  // built on first use
  std::deque<std::pair<std::string, std::shared_ptr<grammar::CompiledGrammar>>> grammars_;  // most recent last
  std::thread thread_;
};

}  // namespace g4::server
