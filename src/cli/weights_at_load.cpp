#include "cli/weights_at_load.h"

#include <chrono>
#include <cstdio>

#include "platform/device.h"

namespace g4::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The SIMD products with f32 activations: what the probe on the checkpoint's weights runs on.
ops::MatmulContext f32_context(const Model& m, ThreadPool& pool) {
  return ops::make_matmul_context(&pool, host_cpu(), m.config.widest_matmul_input(), false, false);
}

}  // namespace

std::optional<WeightsAtLoad> start_weights_at_load(const Args& a, Model& m, ThreadPool& pool, const char* tag) {
  const auto flag = a.get("--weights");
  if (!flag) return std::nullopt;
  const DType target = weight_format_from_flag(*flag);  // a bad value fails before any work
  WeightsAtLoad w;
  w.flag = *flag;
  w.probe = probe_tokens(m.config, kLogitProbeTokens);
  const auto t = Clock::now();
  const ops::MatmulContext mm = f32_context(m, pool);
  w.before = probe_logits(m, w.probe, blocks::Exec{&mm});
  w.probe_s = since(t);
  w.requantized = requantize_weights(m, target, &pool);
  std::fprintf(stderr, "%s --weights %s: %d matrices re-encoded, %.1f -> %.1f MiB in %.2f s\n", tag, flag->c_str(),
               w.requantized.tensors, double(w.requantized.bytes_before) / (1 << 20),
               double(w.requantized.bytes_after) / (1 << 20), w.requantized.seconds);
  return w;
}

void finish_weights_at_load(WeightsAtLoad& w, const Model& m, ThreadPool& pool, const blocks::Exec& run, const char* tag) {
  const auto t = Clock::now();
  std::vector<float> after;
  if (run.matmul) {
    blocks::Exec ex = run;
    ex.times = nullptr;
    after = probe_logits(m, w.probe, ex);
    w.after_path = ops::describe_matmul(*run.matmul, m.weights.layers[0].q_proj->dtype);
  } else {
    const ops::MatmulContext mm = f32_context(m, pool);
    after = probe_logits(m, w.probe, blocks::Exec{&mm});
    w.after_path = "f32 SIMD products (the reference loops' arithmetic, faster)";
  }
  w.probe_s += since(t);
  w.shift = compare_logits(w.before, after, m.config.vocab_size);
  std::fprintf(stderr, "%s --weights %s: logits on a probe of %lld tokens against the checkpoint's weights (f32 compute): %s (%.2f s)\n",
               tag, w.flag.c_str(), (long long)w.probe.size(), describe_logit_shift(w.shift).c_str(), w.probe_s);
}

}  // namespace g4::cli
