#include "cli/weights_at_load.h"

#include <cstdio>

#include "platform/device.h"
#include "platform/error.h"
#include "platform/scope_timer.h"

namespace g4::cli {
namespace {

// The SIMD products with f32 activations: what the probe on the checkpoint's weights runs on.
ops::MatmulContext f32_context(const Model& m, ThreadPool& pool) {
  return ops::make_matmul_context(&pool, host_cpu(), m.config.widest_matmul_input(), false, false);
}

// A probe that cannot run or compare (e.g. a checkpoint whose logits come out NaN) fails the load
// with the checkpoint and the probe named.
[[noreturn]] void probe_failed(const Model& m, const std::string& flag, const char* which, const Error& e) {
  throw Error(m.path.string() + ": --weights " + flag + ": the logit probe " + which + ": " + e.what());
}

}  // namespace

std::optional<WeightsAtLoad> start_weights_at_load(const Args& a, Model& m, ThreadPool& pool, const char* tag) {
  const auto flag = a.get("--weights");
  if (!flag) return std::nullopt;
  const DType target = weight_format_from_flag(*flag);  // a bad value fails before any work
  WeightsAtLoad w;
  w.flag = *flag;
  w.probe = probe_tokens(m.config, kLogitProbeTokens);
  try {
    ScopeTimer timer(&w.probe_s);
    const ops::MatmulContext mm = f32_context(m, pool);
    w.before = probe_logits(m, w.probe, blocks::Exec{&mm});
  } catch (const Error& e) {
    probe_failed(m, w.flag, "on the checkpoint's weights", e);
  }
  w.requantized = requantize_weights(m, target, &pool);
  if (tag)
    std::fprintf(stderr, "%s --weights %s: %d matrices re-encoded, %.1f -> %.1f MiB in %.2f s\n", tag, flag->c_str(),
                 w.requantized.tensors, double(w.requantized.bytes_before) / (1 << 20),
                 double(w.requantized.bytes_after) / (1 << 20), w.requantized.seconds);
  return w;
}

void finish_weights_at_load(WeightsAtLoad& w, const Model& m, ThreadPool& pool, const blocks::Exec& run, const char* tag) {
  blocks::Exec ex = run;
  ex.times = nullptr;  // the probe is not part of the run's timing
  std::optional<ops::MatmulContext> f32;  // for the reference loops' run: their arithmetic, on SIMD
  if (!ex.matmul) ex.matmul = &f32.emplace(f32_context(m, pool));
  w.after_path = run.matmul ? ops::describe_matmul(*run.matmul, m.weights.layers[0].q_proj->dtype)
                            : "f32 SIMD products (the reference loops' arithmetic, faster)";
  try {
    std::vector<float> after;
    {
      ScopeTimer timer(&w.probe_s);
      after = probe_logits(m, w.probe, ex);
    }
    w.shift = compare_logits(w.before, after, m.config.vocab_size);
  } catch (const Error& e) {
    probe_failed(m, w.flag, "on the re-encoded weights", e);
  }
  if (tag)
    std::fprintf(stderr, "%s --weights %s: logits on a probe of %lld tokens against the checkpoint's weights (f32 compute): %s (%.2f s)\n",
                 tag, w.flag.c_str(), (long long)w.probe.size(), describe_logit_shift(w.shift).c_str(), w.probe_s);
}

}  // namespace g4::cli
