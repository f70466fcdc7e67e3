#include "server/generation_service.h"

#include <cstdio>

#include "engine/json_schema_grammar.h"
#include "platform/error.h"
#include "server/token_text_stream.h"

namespace g4::server {

bool ActiveRequest::pop(GenerationEvent& out, Clock::time_point until) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_until(l, until, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void ActiveRequest::push(GenerationEvent ev) {
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_one();
}

namespace {

EngineOptions with_vision(EngineOptions e, const ServedModel& m) {
  e.vision = m.vision.get();
  return e;
}

}  // namespace

GenerationService::GenerationService(const ServedModel& model, ServiceOptions o, Metrics& metrics)
    : model_(model),
      opts_(o),
      metrics_(metrics),
      engine_(*model.model, with_vision(o.engine, model), server_text_streams(*model.tokenizer)) {
  limits_.model_name = model.id;
  limits_.vocab_size = model.model->config.vocab_size;
  limits_.max_context = std::min<int64_t>(o.engine.max_context, model.model->config.max_position_embeddings);
  limits_.default_max_tokens = o.default_max_tokens;
  limits_.max_deadline_seconds = o.request_timeout_s;
  limits_.max_choices = o.engine.max_seqs;
  limits_.accepts_images = model.images_refused.empty();
  if (!limits_.accepts_images) limits_.images_refused = model.images_refused;
  stop_ids_.assign(model.stops.ids.begin(), model.stops.ids.end());
  kv_capacity_bytes_ = kv_footprint(model.model->config, o.engine.kv.dtype).bytes_at(limits_.max_context, model.model->config.sliding_window) *
                       uint64_t(o.engine.max_seqs);
  thread_ = std::thread([this] { loop(); });
}

GenerationService::~GenerationService() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  cancel_all();
  try {
    engine_.run_until_idle();
  } catch (const std::exception&) {
  }
}

void GenerationService::loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
    }
    bool did = false;
    try {
      did = engine_.step();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(mu_);
      fault_ = std::string("engine step failed: ") + e.what();
      std::fprintf(stderr, "{\"event\":\"engine_fault\",\"error\":%s}\n", nlohmann::json(fault_).dump().c_str());
    }
    if (!did) {
      std::unique_lock<std::mutex> l(mu_);
      wake_.wait_for(l, std::chrono::milliseconds(200), [&] { return work_ || stop_; });
      work_ = false;
    }
  }
}

std::variant<std::vector<int>, ApiError> GenerationService::encode_prompt(const GenerationSpec& spec) const {
  std::vector<int> ids;
  try {
    if (spec.endpoint == Endpoint::chat) {
      for (int32_t id : encode_chat_prompt(model_, spec.messages, spec.tools, spec.enable_thinking)) ids.push_back(id);
      // tool_choice required / named: the model continues inside a call we have started.
      const std::string forced = model_.missing_template_tokens.empty() ? forced_tool_call_prefix(spec) : "";
      if (!forced.empty())
        for (int32_t id : model_.tokenizer->encode(forced)) ids.push_back(id);
    } else if (spec.prompt_is_tokens) {
      ids = spec.prompt_tokens;
    } else {
      text::EncodeOptions eo;
      eo.add_bos = true;
      for (int32_t id : model_.tokenizer->encode(spec.prompt, eo)) ids.push_back(id);
    }
  } catch (const Error& e) {
    return bad_request(e.what(), spec.endpoint == Endpoint::chat ? "messages" : "prompt", "invalid_prompt");
  }
  if (auto r = check_prompt_length(ids.size(), spec, limits_); std::holds_alternative<ApiError>(r))
    return std::get<ApiError>(r);
  return ids;
}

namespace {

// The rest of a forced tool call after the prompt's prefix (forced_tool_call_prefix): for
// "required" the function's name and arguments, for a named function the arguments after their
// "{"; then <tool_call|>. Arguments follow each tool's `parameters` schema in Gemma's tool syntax.
std::string tool_call_gbnf(const GenerationSpec& spec, int quote_token, int close_token) {
  grammar::SchemaGrammarBuilder b(grammar::ValueSyntax::gemma_tool, quote_token);
  std::string alts;
  for (size_t i = 0; i < spec.tools.size(); ++i) {
    const auto& f = spec.tools[i]["function"];
    const std::string name = f["name"];
    const RequestJson params = f.contains("parameters") && !f["parameters"].is_null() ? f["parameters"]
                                                                                      : RequestJson::object();
    std::string rule;
    try {
      rule = spec.tool_choice == "function" ? b.add_object_after_open_brace(params, "t" + std::to_string(i) + "-")
                                            : b.add_schema(params, "t" + std::to_string(i) + "-");
    } catch (const grammar::SchemaError& e) {
      throw grammar::SchemaError("tools[" + std::to_string(i) + "].function.parameters" + (e.path().empty() ? "" : "." + e.path()),
                                 e.what());
    }
    if (spec.tool_choice == "function") {
      alts = rule;
      break;
    }
    alts += (alts.empty() ? "" : " | ") + grammar::gbnf_literal(name) + " " + rule;
  }
  b.add_rule("root", "( " + alts + " ) <[" + std::to_string(close_token) + "]>");
  return b.text();
}

}  // namespace

std::variant<std::shared_ptr<grammar::CompiledGrammar>, ApiError> GenerationService::grammar_for(const GenerationSpec& spec) {
  const bool forced_call = spec.endpoint == Endpoint::chat && (spec.tool_choice == "required" || spec.tool_choice == "function");
  if (spec.grammar.empty() && !forced_call) return std::shared_ptr<grammar::CompiledGrammar>();
  const text::Vocabulary& vocab = model_.tokenizer->vocab();
  std::string text = spec.grammar, source = spec.grammar_source;
  if (forced_call) {
    if (!model_.missing_template_tokens.empty())
      return bad_request("'tool_choice' \"" + spec.tool_choice +
                             "\" needs Gemma 4's tool-call tokens, which this model's tokenizer lacks", "tool_choice",
                         "unsupported_value");
    const int quote = vocab.find("<|\"|>"), close = vocab.find("<tool_call|>");
    if (quote < 0 || close < 0)
      return bad_request("'tool_choice' needs the <|\"|> and <tool_call|> tokens, which this tokenizer lacks", "tool_choice",
                         "unsupported_value");
    try {
      text = tool_call_gbnf(spec, quote, close);
    } catch (const grammar::SchemaError& e) {
      return bad_request(e.what(), e.path(), "unsupported_schema");
    }
    source = "tool_choice";
  }
  std::lock_guard<std::mutex> lock(grammar_mu_);
  for (auto& [t, g] : grammars_)
    if (t == text) return g;
  try {
    if (!grammar_vocab_) grammar_vocab_ = grammar::GrammarVocab::from_tokenizer(*model_.tokenizer);
    auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(text), grammar_vocab_);
    grammars_.emplace_back(text, g);
    if (grammars_.size() > 16) grammars_.pop_front();
    return g;
  } catch (const Error& e) {
    return bad_request(source + ": " + e.what(), source, "invalid_grammar");
  }
}

std::variant<GenerationRequest, ApiError> GenerationService::engine_request(const GenerationSpec& spec) {
  auto encoded = encode_prompt(spec);
  if (auto* e = std::get_if<ApiError>(&encoded)) return *e;
  GenerationRequest req;
  req.prompt = std::move(std::get<std::vector<int>>(encoded));
  if (limits_.accepts_images) {
    // Placeholders become each image's span; a prompt whose placeholders and images disagree
    // (the placeholder typed as text, or a completion prompt holding it) is refused.
    auto images = prepare_images(spec, req.prompt, model_.image_ids, model_.vision->config, opts_.images);
    if (auto* e = std::get_if<ApiError>(&images)) return *e;
    req.images = std::move(std::get<std::vector<std::shared_ptr<const PromptImage>>>(images));
    if (auto r = check_prompt_length(req.prompt.size(), spec, limits_); std::holds_alternative<ApiError>(r))
      return std::get<ApiError>(r);
  }
  req.sampling = spec.sampling;
  req.sampling.stop_token_ids.insert(req.sampling.stop_token_ids.end(), stop_ids_.begin(), stop_ids_.end());
  if (spec.endpoint == Endpoint::chat && !model_.missing_template_tokens.empty())
    req.sampling.stop_strings.push_back("<turn|>");  // degraded template: end of turn is plain text
  req.stop_on_degenerate = opts_.stop_on_degenerate;
  req.n = spec.n;
  req.speculative = spec.speculative;
  req.draft_k = spec.draft_k;
  auto g = grammar_for(spec);
  if (auto* e = std::get_if<ApiError>(&g)) return *e;
  req.grammar = std::get<std::shared_ptr<grammar::CompiledGrammar>>(g);
  if (spec.endpoint == Endpoint::chat && spec.tool_choice == "none")
    if (const int call = model_.tokenizer->vocab().find("<|tool_call>"); call >= 0 && call < limits_.vocab_size)
      req.sampling.banned_token_ids.push_back(call);
  try {
    req.sampling.validate(limits_.vocab_size);
  } catch (const Error& e) {
    return bad_request(e.what(), "", "invalid_value");
  }
  return req;
}

EventCallback GenerationService::event_callback(std::shared_ptr<ActiveRequest> active, int n, bool count_metrics) {
  // Metrics and the active set are updated on the engine thread as events arrive.
  struct TokenClock {  // per choice: when its last token came
    std::vector<Clock::time_point> last;
    std::vector<bool> any;
    int unfinished = 1;  // choices still generating
  };
  auto clock = std::make_shared<TokenClock>();
  clock->last.resize(size_t(n));
  clock->any.assign(size_t(n), false);
  clock->unfinished = n;
  Metrics* metrics = count_metrics ? &metrics_ : nullptr;
  return [this, active, clock, metrics](const GenerationEvent& ev) {
    const size_t c = size_t(ev.choice);
    if (metrics && !ev.tokens.empty()) {
      const auto now = Clock::now();
      if (clock->any[c]) metrics->observe_inter_token(std::chrono::duration<double>(now - clock->last[c]).count());
      clock->last[c] = now;
      clock->any[c] = true;
    }
    if (ev.finished) {
      if (metrics) {
        metrics->count_tokens(ev.choice == 0 ? ev.prompt_tokens : 0, ev.generated_tokens);  // one prefill
        metrics->count_speculation(ev.spec);
        if (ev.choice == 0 && ev.image_tokens > 0)  // the prompt's images, prefilled once for all choices
          metrics->count_images(ev.images_encoded, ev.vision_seconds, ev.image_cache_hits, ev.image_tokens_prefilled);
        if (ev.generated_tokens > 0 && ev.choice == 0) metrics->observe_ttft(ev.ttft_seconds);
        metrics->count_verdict(std::string(degeneracy_kind_name(ev.verdict.kind)), ev.stopped_degenerate);
        if (ev.finish_reason == "cancelled" && ev.choice == 0) metrics->count_cancelled();
      }
      if (--clock->unfinished == 0) {
        std::lock_guard<std::mutex> l(active_mu_);
        if (!active_.erase(ev.request_id)) finished_early_.insert(ev.request_id);
      }
    }
    active->push(ev);
  };
}

std::optional<ApiError> GenerationService::submit(GenerationRequest req, EventCallback cb, ActiveRequest& active) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (draining_) {
      metrics_.count_rejected("draining");
      return ApiError{503, "the server is shutting down and accepts no new requests", "server_error", "", "draining"};
    }
    if (engine_.waiting() >= opts_.queue_limit) {
      metrics_.count_rejected("queue_full");
      return ApiError{429, "the server is busy: " + std::to_string(opts_.queue_limit) + " requests are already waiting; retry shortly",
                      "rate_limit_error", "", "queue_full"};
    }
    try {
      active.engine_id = engine_.submit(std::move(req), cb);
    } catch (const Error& e) {
      return bad_request(e.what(), "", "invalid_request");
    }
    work_ = true;
  }
  wake_.notify_all();
  {
    std::lock_guard<std::mutex> l(active_mu_);
    if (!finished_early_.erase(active.engine_id)) active_.insert(active.engine_id);
  }
  return std::nullopt;
}

std::variant<std::shared_ptr<ActiveRequest>, ApiError> GenerationService::start(const GenerationSpec& spec, bool count_metrics) {
  auto req_or = engine_request(spec);
  if (auto* e = std::get_if<ApiError>(&req_or)) return *e;
  GenerationRequest& req = std::get<GenerationRequest>(req_or);

  auto active = std::make_shared<ActiveRequest>();
  active->prompt_tokens = req.prompt.size();
  active->submitted = Clock::now();
  const double timeout = spec.deadline_seconds > 0 ? spec.deadline_seconds : opts_.request_timeout_s;
  active->deadline = active->submitted + std::chrono::microseconds(int64_t(timeout * 1e6));

  EventCallback cb = event_callback(active, req.n, count_metrics);
  if (auto e = submit(std::move(req), std::move(cb), *active)) return *e;
  return active;
}

void GenerationService::cancel(int id) {
  engine_.cancel(id);
  {
    std::lock_guard<std::mutex> l(mu_);
    work_ = true;
  }
  wake_.notify_all();
}

void GenerationService::cancel_all() {
  std::vector<int> ids;
  {
    std::lock_guard<std::mutex> l(active_mu_);
    ids.assign(active_.begin(), active_.end());
  }
  for (int id : ids) cancel(id);
}

int GenerationService::in_flight() const {
  std::lock_guard<std::mutex> l(active_mu_);
  return int(active_.size());
}

MetricGauges GenerationService::gauges(bool ready) const {
  MetricGauges g;
  g.queue_depth = engine_.waiting();
  g.running_sequences = engine_.running();
  g.kv_cache_bytes = engine_.kv_bytes_in_use();
  g.kv_cache_capacity_bytes = kv_capacity_bytes_;
  g.prefix_cache = engine_.prefix_cache_stats();
  g.ready = ready;
  return g;
}

std::string GenerationService::engine_fault() const {
  std::lock_guard<std::mutex> l(mu_);
  return fault_;
}

}  // namespace g4::server
