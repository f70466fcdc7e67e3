#include "server/metrics.h"

#include <cstdio>

#include "engine/degeneracy.h"

namespace g4::server {

namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {
  // Every verdict kind is listed from the start, so a dashboard sees zeros rather than gaps.
  for (auto k : {DegeneracyKind::ok, DegeneracyKind::whitespace_collapse, DegeneracyKind::single_char_collapse,
                 DegeneracyKind::token_loop, DegeneracyKind::repeated_ngram, DegeneracyKind::prompt_echo})
    verdicts_[std::string(degeneracy_kind_name(k))] = 0;
}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{route, status}];
}
void Metrics::count_speculation(const SpeculationStats& s) {
  std::lock_guard<std::mutex> l(mu_);
  spec_steps_ += uint64_t(s.verify_steps);
  spec_drafted_ += uint64_t(s.drafted);
  spec_accepted_ += uint64_t(s.accepted);
  spec_draft_seconds_ += s.draft_seconds;
}
void Metrics::count_images(int64_t encoded, double vision_seconds, int64_t cache_hits, int64_t tokens_prefilled) {
  std::lock_guard<std::mutex> l(mu_);
  images_encoded_ += uint64_t(encoded);
  vision_seconds_ += vision_seconds;
  image_cache_hits_ += uint64_t(cache_hits);
  image_tokens_prefilled_ += uint64_t(tokens_prefilled);
}

void Metrics::count_tokens(int64_t p, int64_t g) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += uint64_t(p);
  generated_tokens_ += uint64_t(g);
}
void Metrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.observe(s);
}
void Metrics::observe_inter_token(double s) {
  std::lock_guard<std::mutex> l(mu_);
  itl_.observe(s);
}
void Metrics::count_verdict(const std::string& kind, bool stopped) {
  std::lock_guard<std::mutex> l(mu_);
  ++verdicts_[kind];
  if (stopped) ++stopped_degenerate_;
}
void Metrics::count_rejected(const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  ++rejected_[reason];
}
void Metrics::count_cancelled() {
  std::lock_guard<std::mutex> l(mu_);
  ++cancelled_;
}

namespace {

// The exposition format's two comment lines of a metric family.
void family(std::string& o, const char* name, const char* type, const char* help) {
  o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A family of one unlabelled sample.
void single(std::string& o, const char* name, const char* type, const char* help, const std::string& value) {
  family(o, name, type, help);
  o += std::string(name) + " " + value + "\n";
}

// A family with one sample per label value.
void labelled(std::string& o, const char* name, const char* type, const char* help, const char* label,
              const std::map<std::string, uint64_t>& values) {
  family(o, name, type, help);
  for (const auto& [k, v] : values) o += std::string(name) + "{" + label + "=\"" + k + "\"} " + std::to_string(v) + "\n";
}

void render_gauges(std::string& o, const MetricGauges& g) {
  single(o, "g4_queue_depth", "gauge", "Requests waiting for a sequence slot.", std::to_string(g.queue_depth));
  single(o, "g4_running_sequences", "gauge", "Sequences prefilling or decoding.", std::to_string(g.running_sequences));
  single(o, "g4_kv_cache_bytes", "gauge", "KV cache bytes held by live sequences.", std::to_string(g.kv_cache_bytes));
  single(o, "g4_kv_cache_capacity_bytes", "gauge", "KV cache bytes at the configured capacity (max seqs x context).",
         std::to_string(g.kv_cache_capacity_bytes));
  single(o, "g4_kv_cache_usage_ratio", "gauge", "KV cache bytes in use over capacity.",
         num(g.kv_cache_capacity_bytes ? double(g.kv_cache_bytes) / double(g.kv_cache_capacity_bytes) : 0.0));
  const PrefixCacheStats& pc = g.prefix_cache;
  single(o, "g4_prefix_cache_hit_tokens_total", "counter", "Prompt tokens restored from the prefix cache.",
         std::to_string(pc.hit_tokens));
  single(o, "g4_prefix_cache_miss_tokens_total", "counter", "Prompt tokens prefilled while the prefix cache was on.",
         std::to_string(pc.miss_tokens));
  single(o, "g4_prefix_cache_evictions_total", "counter", "Prefix cache entries dropped (budget or KV pressure).",
         std::to_string(pc.evictions));
  single(o, "g4_prefix_cache_bytes", "gauge", "KV bytes the prefix cache holds.", std::to_string(pc.bytes));
  single(o, "g4_prefix_cache_entries", "gauge", "Sequences the prefix cache holds.", std::to_string(pc.entries));
  single(o, "g4_ready", "gauge", "1 once the readiness self-check passed.", g.ready ? "1" : "0");
}

}  // namespace

std::string Metrics::render(const MetricGauges& g) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string o;
  family(o, "g4_http_requests_total", "counter", "HTTP requests by route and status code.");
  for (const auto& [k, v] : requests_)
    o += "g4_http_requests_total{route=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"} " +
         std::to_string(v) + "\n";
  single(o, "g4_prompt_tokens_total", "counter", "Prompt tokens of finished generations.", std::to_string(prompt_tokens_));
  single(o, "g4_generated_tokens_total", "counter", "Tokens generated.", std::to_string(generated_tokens_));
  family(o, "g4_time_to_first_token_seconds", "histogram", "Submit to first generated token.");
  ttft_.render("g4_time_to_first_token_seconds", o);
  family(o, "g4_inter_token_latency_seconds", "histogram", "Time between consecutive generated tokens of one sequence.");
  itl_.render("g4_inter_token_latency_seconds", o);
  labelled(o, "g4_degeneracy_verdicts_total", "counter", "Degeneracy verdicts of finished generations, by kind.", "kind",
           verdicts_);
  single(o, "g4_degenerate_stops_total", "counter", "Generations ended early because a loop was certain.",
         std::to_string(stopped_degenerate_));
  labelled(o, "g4_rejected_requests_total", "counter", "Requests refused before generation (queue_full, draining).",
           "reason", rejected_);
  single(o, "g4_cancelled_requests_total", "counter", "Generations cancelled (client gone or deadline passed).",
         std::to_string(cancelled_));
  single(o, "g4_speculative_verify_steps_total", "counter", "Decode steps that verified drafted tokens.",
         std::to_string(spec_steps_));
  single(o, "g4_speculative_draft_tokens_total", "counter", "Tokens drafted for verification.", std::to_string(spec_drafted_));
  single(o, "g4_speculative_accepted_tokens_total", "counter", "Drafted tokens that verification kept.",
         std::to_string(spec_accepted_));
  single(o, "g4_speculative_draft_seconds_total", "counter", "Time spent proposing drafts.",
         std::to_string(spec_draft_seconds_));
  single(o, "g4_images_encoded_total", "counter", "Images run through the vision tower and projector.",
         std::to_string(images_encoded_));
  single(o, "g4_vision_seconds_total", "counter", "Time spent in the vision tower and projector.",
         std::to_string(vision_seconds_));
  single(o, "g4_image_cache_hits_total", "counter", "Images whose soft tokens came from the encoder cache.",
         std::to_string(image_cache_hits_));
  single(o, "g4_image_prefill_tokens_total", "counter",
         "Image soft tokens prefilled (not restored from the prefix cache).", std::to_string(image_tokens_prefilled_));
  render_gauges(o, g);
  return o;
}

}  // namespace g4::server
