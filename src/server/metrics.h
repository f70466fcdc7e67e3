// Prometheus metrics for the server, rendered in the text exposition format (version 0.0.4).
// Counters and histograms are updated from handler threads and the engine thread (one mutex);
// gauges (queue depth, running sequences, KV cache use, readiness) are sampled at scrape time.
#pragma once
#include "engine/prefix_cache.h"
#include "engine/speculative.h"
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace g4::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends "<name>_bucket{le=...}", "_sum" and "_count" lines.
  void render(const std::string& name, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); cumulated when rendered
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct MetricGauges {
  int64_t queue_depth = 0;
  int64_t running_sequences = 0;
  uint64_t kv_cache_bytes = 0;
  uint64_t kv_cache_capacity_bytes = 0;
  PrefixCacheStats prefix_cache;  // counters since start; zeros when the cache is off
  bool ready = false;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void count_tokens(int64_t prompt_tokens, int64_t generated_tokens);
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  void count_verdict(const std::string& kind, bool stopped_early);
  void count_rejected(const std::string& reason);  // 429 queue full, 503 draining, ...
  void count_cancelled();
  void count_speculation(const SpeculationStats& s);
  // A finished request's images: encoded by the tower (and the seconds it took), served by the
  // encoder cache, and soft tokens prefilled (not restored from the prefix cache).
  void count_images(int64_t encoded, double vision_seconds, int64_t cache_hits, int64_t tokens_prefilled);

  std::string render(const MetricGauges& gauges) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, itl_;
  std::map<std::string, uint64_t> verdicts_;
  uint64_t stopped_degenerate_ = 0;
  std::map<std::string, uint64_t> rejected_;
  uint64_t cancelled_ = 0;
  uint64_t spec_steps_ = 0, spec_drafted_ = 0, spec_accepted_ = 0;
  double spec_draft_seconds_ = 0;
  uint64_t images_encoded_ = 0, image_cache_hits_ = 0, image_tokens_prefilled_ = 0;
  double vision_seconds_ = 0;
};

}  // namespace g4::server
