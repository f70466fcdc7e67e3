// `--compute f32|bf16` for the commands that run the model (bench, generate, serve): the dtype
// policy resolved for this device and checkpoint with the user's request, and whether the
// weight products take the bf16 kernel. Default: what the policy picks (bf16 where the CPU
// confirmed AVX512_BF16 and the checkpoint is bf16; int8 activations for q8/q4 weights where it
// confirmed AVX512_VNNI, unless --compute f32).
#pragma once
#include <string>

#include "cli/args.h"
#include "engine/kv_rows.h"
#include "model/model.h"
#include "model/weight_interleave.h"
#include "platform/dtype_policy.h"
#include "platform/thread_pool.h"

namespace g4::cli {

struct ComputeChoice {
  DevicePolicy policy;
  bool bf16 = false;  // MatmulContext::bf16_compute / EngineOptions::bf16_compute
  bool int8 = false;  // MatmulContext::int8_activations / EngineOptions::int8_activations
};

// Throws g4::Error naming --compute for a value the policy refuses.
ComputeChoice resolve_compute(const Args& a, const Model& m);

// After weight placement: when the products run on the VNNI int8 kernel, the Q8_0/Q4_0/Q4_K/Q5_K/Q6_K matrices
// in memory g4 owns are interleaved for it, and when they run on the VDPBF16PS kernel (or, on AVX2
// CPUs without it, the f32 FMA kernel of ops/matmul/gemm_bf16_256.h) the BF16 ones
// (model/weight_interleave.h). Returns what was done
// (all zero when the products take another kernel); describe_interleave words it.
InterleaveReport prepare_weights(const ComputeChoice& c, Model& m, ThreadPool* pool);

// The KV cache dtype: --kv when given, else the policy's (bf16 where the compute is bf16, f16
// through F16C, else f32); f32 for the reference loops (`reference`), which are the spec.
KvDType resolve_kv(const Args& a, const ComputeChoice& c, bool reference);

}  // namespace g4::cli
