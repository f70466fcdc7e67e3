#include "cli/bench_device.h"

#include <algorithm>
#include <cstdio>

#include "cli/bench_stats.h"
#include "engine/kv_cache.h"
#include "ops/rows/row_reductions.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

struct Timed {
  double wall_s = 0, device_s = 0;
};

// Runs rows on the device; the wall time and the device's own time for them.
Timed timed_forward(StepForward& d, const std::vector<BatchRow>& rows, KvCache& kv, std::vector<float>& logits) {
  const double dev0 = d.device_seconds();
  const auto t = BenchClock::now();
  d.forward(rows, kv, logits, nullptr);
  (void)ops::argmax(logits.data(), int64_t(logits.size()));  // the token is chosen here, as in the CPU bench
  return {seconds_since(t), d.device_seconds() - dev0};
}

Timed prefill(StepForward& d, KvCache& kv, const std::vector<int>& prompt) {
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (size_t p = 0; p < prompt.size(); ++p) rows.push_back({seq, int64_t(p), prompt[p], p + 1 == prompt.size()});
  std::vector<float> logits;
  const Timed t = timed_forward(d, rows, kv, logits);
  kv.free_sequence(seq);
  return t;
}

// gen tokens one at a time after `depth` positions of synthetic K/V (loaded to the device with
// the sequence's first step).
Timed decode(StepForward& d, KvCache& kv, int64_t depth, int64_t gen) {
  const int seq = kv.add_sequence();
  if (depth > 0) kv.fill_for_benchmark(seq, depth, 42);
  std::vector<float> logits;
  int tok = 5;
  Timed sum;
  for (int64_t g = 0; g < gen; ++g) {
    const Timed t = timed_forward(d, {{seq, kv.length(seq), tok, true}}, kv, logits);
    if (g > 0 || depth == 0) sum.wall_s += t.wall_s, sum.device_s += t.device_s;  // not the depth's load
    tok = int(ops::argmax(logits.data(), int64_t(logits.size())));
  }
  kv.free_sequence(seq);
  return sum;
}

}  // namespace

void check_device_bench_flags(const Args& a) {
  for (const char* f : {"--streams", "--chat-turns", "--speculative", "--image", "--image-size", "--json-schema",
                        "--json-object", "--grammar", "--json", "--weight-memory"})
    if (a.has(f))
      throw Error(std::string(f) + " is not measured on a Vulkan device yet (g4 bench --device cpu measures it)");
}

int run_device_bench(const BenchFlags& f, const Model& m, double load_s, StepForward& device, const std::string& line) {
  std::fprintf(stderr, "[bench] %s\n", line.c_str());
  KvCacheOptions ko;
  ko.max_total_tokens = (f.prompt_len + f.depth + f.gen + 128) * 2;
  KvCache kv(m.config, ko);
  device.attach(kv);
  const std::vector<int> prompt = bench_prompt_tokens(m.config, f.prompt_len);
  std::fprintf(stderr, "[bench] cold prefill of %lld tokens ...\n", (long long)f.prompt_len);
  const Timed cold = prefill(device, kv, prompt);
  std::vector<double> warm, warm_dev, d0, d0_dev, dd, dd_dev;
  for (int64_t i = 0; i < f.repeat; ++i) {
    const Timed w = prefill(device, kv, prompt);
    warm.push_back(double(f.prompt_len) / w.wall_s), warm_dev.push_back(w.device_s / w.wall_s);
    const Timed a = decode(device, kv, 0, f.gen);
    d0.push_back(double(f.gen) / a.wall_s), d0_dev.push_back(a.device_s / a.wall_s);
    if (f.depth > 0) {
      const Timed b = decode(device, kv, f.depth, f.gen);
      dd.push_back(double(f.gen - 1) / b.wall_s), dd_dev.push_back(b.device_s / b.wall_s);
    }
    std::fprintf(stderr, "[bench] run %lld/%lld: prefill %.1f tok/s, decode %.2f tok/s\n", (long long)i + 1,
                 (long long)f.repeat, warm.back(), d0.back());
  }
  std::printf("g4 bench on %s (host CPU %s)\n", device.name().c_str(), host_cpu().name.c_str());
  std::printf("load (mmap + validate)        %8.3f s\n", load_s);
  std::printf("prefill %lld cold (TTFT)      %8.3f s   %8.1f tok/s   device busy %3.0f%%\n", (long long)f.prompt_len,
              cold.wall_s, double(f.prompt_len) / cold.wall_s, 100 * cold.device_s / cold.wall_s);
  std::printf("prefill %lld warm (median)               %8.1f tok/s   device busy %3.0f%%\n", (long long)f.prompt_len,
              median(warm), 100 * median(warm_dev));
  std::printf("decode at depth 0 (median)              %8.2f tok/s   device busy %3.0f%%\n", median(d0),
              100 * median(d0_dev));
  if (f.depth > 0)
    std::printf("decode at depth %lld (median)           %8.2f tok/s   device busy %3.0f%%\n", (long long)f.depth,
                median(dd), 100 * median(dd_dev));
  std::printf("device busy = the step's dispatches by timestamp queries / wall time of the step; no GPU\n"
              "read-bandwidth kernel is measured yet, so no roofline ratio is given.\n");
  return 0;
}

}  // namespace g4::cli
