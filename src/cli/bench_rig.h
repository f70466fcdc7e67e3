// g4 bench's set-up: the flags, the model loaded and prepared the way the run uses it, and the
// machine's ceilings measured beside it (memory-read bandwidth, FMA throughput, the peak of the
// instruction the prefill products issue). Every later phase of the bench runs on this rig.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cli/args.h"
#include "cli/compute_choice.h"
#include "cli/weights_at_load.h"
#include "engine/kv_cache.h"
#include "model/executor.h"
#include "model/model.h"
#include "model/weight_interleave.h"
#include "model/weight_placement.h"
#include "ops/matmul/matmul.h"
#include "platform/bandwidth.h"
#include "platform/fma_throughput.h"
#include "platform/thread_pool.h"

namespace g4::cli {

struct BenchFlags {
  int64_t prompt_len = 0, gen = 0, depth = 0, repeat = 0;
  int threads = 0;
  bool reference = false;  // the f32 reference loops instead of the SIMD kernels
};

// --prompt-len, --gen, --depth, --repeat, --threads, --reference; throws g4::Error naming the
// bounds when one is out of range.
BenchFlags parse_bench_flags(const Args& a);

// Holds pointers into itself (ex -> mm, mm -> pool): built in place, never copied.
struct BenchRig {
  BenchFlags flags;
  std::unique_ptr<Model> model;
  double load_s = 0;  // cold load (mmap + validate)
  std::unique_ptr<ThreadPool> pool;
  std::optional<WeightsAtLoad> requant;  // --weights
  PlacementReport placed;
  ComputeChoice compute;
  InterleaveReport interleaved;
  BandwidthOptions bandwidth;  // the full measurement, taken before and after the decode runs
  BandwidthResult bw_before;
  FmaScaling fma;
  ops::MatmulContext mm;
  blocks::Exec ex;  // the products on mm unless --reference
  MacUnit unit = MacUnit::F32Fma;  // the instruction the prefill products issue
  MacPeak peak;
  KvCacheOptions kv_options;
  std::unique_ptr<KvCache> kv;
  std::vector<int> prompt;  // --prompt-len synthetic tokens

  BenchRig() = default;
  BenchRig(const BenchRig&) = delete;
  BenchRig& operator=(const BenchRig&) = delete;
};

// Loads and prepares the model, measures the ceilings and sizes the cache, with progress on
// stderr. Errors of --compute and --kv surface where the run first needs them.
void set_up_bench(const Args& a, const BenchFlags& flags, BenchRig& rig);

// The benches' synthetic prompt: n ids spread over the vocabulary (the same for every run, so
// two builds and two devices see the same input).
std::vector<int> bench_prompt_tokens(const ModelConfig& c, int64_t n);

}  // namespace g4::cli
