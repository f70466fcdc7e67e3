#include "cli/bench_rig.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli/bench_stats.h"
#include "cli/model_arg.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

// The load, then the weights as the run holds them: re-encoded (--weights), placed, interleaved.
void load_weights(const Args& a, BenchRig& r) {
  const ModelArg m = model_arg(a.require("--model"));
  auto t0 = BenchClock::now();
  r.model = load_model(m.path);
  r.load_s = seconds_since(t0);
  std::fprintf(stderr, "[bench] loaded %s in %.2f s\n", r.model->path.string().c_str(), r.load_s);

  r.pool = std::make_unique<ThreadPool>(r.flags.threads);
  r.requant = start_weights_at_load(a, *r.model, *r.pool, "[bench]");
  r.placed = place_weights(*r.model, weight_memory_from_flag(a.get_or("--weight-memory", "auto")), r.pool.get());
  std::fprintf(stderr, "[bench] weights: %s\n", describe_placement(r.placed).c_str());
  r.compute = resolve_compute(a, *r.model);
  r.interleaved = r.flags.reference ? InterleaveReport{} : prepare_weights(r.compute, *r.model, r.pool.get());
  if (!describe_interleave(r.interleaved).empty())
    std::fprintf(stderr, "[bench] weights: %s\n", describe_interleave(r.interleaved).c_str());
}

void measure_bandwidth_and_fma(BenchRig& r) {
  const int threads = r.flags.threads;
  r.bandwidth.threads = threads;
  r.bandwidth.buffer_bytes = uint64_t(1) << 30;  // 1 GiB: past any L3 a VM reports, so it is DRAM we time
  r.bandwidth.repetitions = 5;
  std::fprintf(stderr, "[bench] measuring memory-read bandwidth with %d threads (again after decode) ...\n", threads);
  r.bw_before = measure_read_bandwidth(r.bandwidth);
  std::fprintf(stderr, "[bench] measuring FMA throughput on 1 and %d threads ...\n", threads);
  r.fma = measure_fma_scaling(threads);
}

// The products' context, the --weights probe on it, and the peak of the instruction they issue
// (the FMA loop's when that is f32 FMA).
void make_products(BenchRig& r) {
  const bool reference = r.flags.reference;
  r.mm = ops::make_matmul_context(r.pool.get(), host_cpu(), r.model->config.widest_matmul_input(), r.compute.bf16,
                                  r.compute.int8);
  if (!reference) r.ex.matmul = &r.mm;
  if (r.requant) finish_weights_at_load(*r.requant, *r.model, *r.pool, r.ex, "[bench]");
  r.unit = reference ? MacUnit::F32Fma : ops::mac_unit_of(r.mm, r.model->weights.layers[0].q_proj->dtype);
  r.peak = MacPeak{r.unit, r.flags.threads, r.fma.all_threads_gflops};
  if (r.unit != MacUnit::F32Fma) {
    std::fprintf(stderr, "[bench] measuring the %s peak on %d threads ...\n", mac_unit_name(r.unit), r.flags.threads);
    r.peak = measure_mac_peak(r.unit, r.flags.threads);
  }
}

// A cache for the longest run (prompt or depth, plus the decoded tokens) twice over, and the prompt.
void make_cache(const Args& a, BenchRig& r) {
  const ModelConfig& c = r.model->config;
  const BenchFlags& f = r.flags;
  KvCacheOptions& ko = r.kv_options;
  ko.dtype = resolve_kv(a, r.compute, f.reference);
  ko.max_total_tokens = (std::max(f.prompt_len, f.depth) + f.gen + 2 * ko.block_tokens) / ko.block_tokens * ko.block_tokens * 2;
  ko.ring_extra_slots = 9;  // --speculative times steps of up to 9 rows, each rolled back
  r.kv = std::make_unique<KvCache>(c, ko);
  r.prompt = bench_prompt_tokens(c, f.prompt_len);
}

}  // namespace

BenchFlags parse_bench_flags(const Args& a) {
  BenchFlags f;
  f.prompt_len = a.get_int("--prompt-len", 512);
  f.gen = a.get_int("--gen", 128);
  f.depth = a.get_int("--depth", 4096);
  f.repeat = a.get_int("--repeat", 5);
  f.threads = int(a.get_int("--threads", int(std::max(1u, std::thread::hardware_concurrency()))));
  if (f.prompt_len < 1 || f.gen < 2 || f.depth < 0 || f.repeat < 1 || f.threads < 1)
    throw Error("bench: --prompt-len >= 1, --gen >= 2, --depth >= 0, --repeat >= 1, --threads >= 1");
  f.reference = a.has("--reference");
  return f;
}

void set_up_bench(const Args& a, const BenchFlags& flags, BenchRig& rig) {
  rig.flags = flags;
  load_weights(a, rig);
  measure_bandwidth_and_fma(rig);
  make_products(rig);
  make_cache(a, rig);
}

std::vector<int> bench_prompt_tokens(const ModelConfig& c, int64_t n) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int(4 + (i * 7919) % (c.vocab_size - 4));
  return t;
}

}  // namespace g4::cli
