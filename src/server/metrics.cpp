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

std::string Metrics::render(const MetricGauges& g) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string o;
  o += "# HELP g4_http_requests_total HTTP requests by route and status code.\n# TYPE g4_http_requests_total counter\n";
  for (const auto& [k, v] : requests_)
    o += "g4_http_requests_total{route=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"} " +
         std::to_string(v) + "\n";
  o += "# HELP g4_prompt_tokens_total Prompt tokens of finished generations.\n# TYPE g4_prompt_tokens_total counter\n";
  o += "g4_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  o += "# HELP g4_generated_tokens_total Tokens generated.\n# TYPE g4_generated_tokens_total counter\n";
  o += "g4_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  o += "# HELP g4_time_to_first_token_seconds Submit to first generated token.\n# TYPE g4_time_to_first_token_seconds histogram\n";
  ttft_.render("g4_time_to_first_token_seconds", o);
  o += "# HELP g4_inter_token_latency_seconds Time between consecutive generated tokens of one sequence.\n"
       "# TYPE g4_inter_token_latency_seconds histogram\n";
  itl_.render("g4_inter_token_latency_seconds", o);
  o += "# HELP g4_degeneracy_verdicts_total Degeneracy verdicts of finished generations, by kind.\n"
       "# TYPE g4_degeneracy_verdicts_total counter\n";
  for (const auto& [k, v] : verdicts_) o += "g4_degeneracy_verdicts_total{kind=\"" + k + "\"} " + std::to_string(v) + "\n";
  o += "# HELP g4_degenerate_stops_total Generations ended early because a loop was certain.\n"
       "# TYPE g4_degenerate_stops_total counter\n";
  o += "g4_degenerate_stops_total " + std::to_string(stopped_degenerate_) + "\n";
  o += "# HELP g4_rejected_requests_total Requests refused before generation (queue_full, draining).\n"
       "# TYPE g4_rejected_requests_total counter\n";
  for (const auto& [k, v] : rejected_) o += "g4_rejected_requests_total{reason=\"" + k + "\"} " + std::to_string(v) + "\n";
  o += "# HELP g4_cancelled_requests_total Generations cancelled (client gone or deadline passed).\n"
       "# TYPE g4_cancelled_requests_total counter\n";
  o += "g4_cancelled_requests_total " + std::to_string(cancelled_) + "\n";
  o += "# HELP g4_queue_depth Requests waiting for a sequence slot.\n# TYPE g4_queue_depth gauge\n";
  o += "g4_queue_depth " + std::to_string(g.queue_depth) + "\n";
  o += "# HELP g4_running_sequences Sequences prefilling or decoding.\n# TYPE g4_running_sequences gauge\n";
  o += "g4_running_sequences " + std::to_string(g.running_sequences) + "\n";
  o += "# HELP g4_kv_cache_bytes KV cache bytes held by live sequences.\n# TYPE g4_kv_cache_bytes gauge\n";
  o += "g4_kv_cache_bytes " + std::to_string(g.kv_cache_bytes) + "\n";
  o += "# HELP g4_kv_cache_capacity_bytes KV cache bytes at the configured capacity (max seqs x context).\n"
       "# TYPE g4_kv_cache_capacity_bytes gauge\n";
  o += "g4_kv_cache_capacity_bytes " + std::to_string(g.kv_cache_capacity_bytes) + "\n";
  o += "# HELP g4_kv_cache_usage_ratio KV cache bytes in use over capacity.\n# TYPE g4_kv_cache_usage_ratio gauge\n";
  o += "g4_kv_cache_usage_ratio " +
       num(g.kv_cache_capacity_bytes ? double(g.kv_cache_bytes) / double(g.kv_cache_capacity_bytes) : 0.0) + "\n";
  const PrefixCacheStats& pc = g.prefix_cache;
  o += "# HELP g4_prefix_cache_hit_tokens_total Prompt tokens restored from the prefix cache.\n"
       "# TYPE g4_prefix_cache_hit_tokens_total counter\n";
  o += "g4_prefix_cache_hit_tokens_total " + std::to_string(pc.hit_tokens) + "\n";
  o += "# HELP g4_prefix_cache_miss_tokens_total Prompt tokens prefilled while the prefix cache was on.\n"
       "# TYPE g4_prefix_cache_miss_tokens_total counter\n";
  o += "g4_prefix_cache_miss_tokens_total " + std::to_string(pc.miss_tokens) + "\n";
  o += "# HELP g4_prefix_cache_evictions_total Prefix cache entries dropped (budget or KV pressure).\n"
       "# TYPE g4_prefix_cache_evictions_total counter\n";
  o += "g4_prefix_cache_evictions_total " + std::to_string(pc.evictions) + "\n";
  o += "# HELP g4_prefix_cache_bytes KV bytes the prefix cache holds.\n# TYPE g4_prefix_cache_bytes gauge\n";
  o += "g4_prefix_cache_bytes " + std::to_string(pc.bytes) + "\n";
  o += "# HELP g4_prefix_cache_entries Sequences the prefix cache holds.\n# TYPE g4_prefix_cache_entries gauge\n";
  o += "g4_prefix_cache_entries " + std::to_string(pc.entries) + "\n";
  o += "# HELP g4_ready 1 once the readiness self-check passed.\n# TYPE g4_ready gauge\n";
  o += std::string("g4_ready ") + (g.ready ? "1" : "0") + "\n";
  return o;
}

}  // namespace g4::server
