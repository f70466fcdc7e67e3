#include "cli/compute_choice.h"

#include <cstdio>

#include "cli/device_choice.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4::cli {

ComputeChoice resolve_compute(const Args& a, const Model& m) {
  UserRequest request;
  if (auto v = a.get("--compute")) request.compute = parse_num_format(*v, "--compute");
  if (auto v = a.get("--weights")) request.weights = parse_num_format(*v, "--weights");
  ComputeChoice c;
  c.policy = resolve_policy(host_cpu(), checkpoint_format(m.weights.dtype), request);
  // On an explicit Vulkan device the CPU's kernels never run (a refusal stops the run): its
  // warnings (f16 or bf16 emulated on this CPU) would be about arithmetic nobody does.
  if (!names_vulkan(a))
    for (const auto& w : c.policy.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  c.bf16 = c.policy.compute == NumFormat::BF16;
  c.int8 = c.policy.activations == NumFormat::Q8;
  return c;
}

InterleaveReport prepare_weights(const ComputeChoice& c, Model& m, ThreadPool* pool) {
  // What the products will read (ops::matmul with this policy): the int8 kernels; VDPBF16PS, or
  // on AVX2 CPUs the f32 FMA kernel of gemm_bf16_256.h, for BF16.
  const ops::MatmulContext products{.bf16_compute = c.bf16, .int8_activations = c.int8};
  const InterleaveFor kernels{ops::uses_int8_kernel(products), ops::reads_bf16_interleaved(products)};
  if (!kernels.int8 && !kernels.bf16) return {};
  return interleave_weights(m, pool, kernels);
}

KvDType resolve_kv(const Args& a, const ComputeChoice& c, bool reference) {
  if (auto v = a.get("--kv")) {
    try {
      return kv_dtype_from_name(*v);
    } catch (const Error& e) {
      throw Error(std::string("--kv: ") + e.what());
    }
  }
  if (reference) return KvDType::F32;
  switch (c.policy.kv) {
    case NumFormat::BF16: return KvDType::BF16;
    case NumFormat::F16: return KvDType::F16;
    default: return KvDType::F32;
  }
}

}  // namespace g4::cli
