#include "cli/bench_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "model/weight_placement.h"

namespace g4::cli {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Spread spread_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {v[n / 2], v[n / 4], v[3 * n / 4], v.front(), v.back()};
}

std::string run_range(const std::vector<double>& v, int digits) {
  if (v.empty()) return "";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f-%.*f", digits, *lo, digits, *hi);
  return buf;
}

uint64_t rss_high_water_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return uint64_t(ru.ru_maxrss) * 1024;
}

uint64_t rss_now_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

uint64_t weight_bytes_per_token(const Model& m) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  uint64_t b = w.bound_bytes;
  b -= w.embed_tokens->nbytes;
  b += w.embed_tokens->nbytes / uint64_t(c.vocab_size);  // the input row
  if (w.lm_head == w.embed_tokens) b += w.lm_head->nbytes;  // the tied head reads all of it
  if (w.embed_per_layer) b -= w.embed_per_layer->nbytes - w.embed_per_layer->nbytes / uint64_t(c.vocab_size_per_layer_input);
  for (const LayerWeights& lw : w.layers)
    if (lw.experts_gate_up) {
      const uint64_t e = lw.experts_gate_up->nbytes + lw.experts_down->nbytes;
      b -= e - e / uint64_t(c.num_experts) * uint64_t(c.top_k_experts);
    }
  return b;
}

double prefill_macs_per_token(Model& m, int64_t prompt_len) {
  const ModelConfig& c = m.config;
  ModelWeights& w = m.weights;
  double macs = 0;
  for (const TensorView** t : streamed_matrices(w)) {
    double n = 1;
    for (int64_t d : (*t)->shape) n *= double(d);
    if (*t == w.lm_head) n /= double(prompt_len);
    const LayerWeights* owner = nullptr;
    for (const LayerWeights& lw : w.layers)
      if (*t == lw.experts_gate_up || *t == lw.experts_down) owner = &lw;
    if (owner) n *= double(c.top_k_experts) / double(c.num_experts);
    macs += n;
  }
  return macs;
}

}  // namespace g4::cli
