#include "gpu/gpu_policy.h"

#include <nlohmann/json.hpp>

#include "platform/error.h"

namespace g4::gpu {

namespace {
std::string name(NumFormat f) { return std::string(num_format_name(f)); }
std::string label(const VulkanDeviceInfo& d) { return "vulkan:" + std::to_string(d.index) + " (" + d.name + ")"; }


// Why bf16 arithmetic cannot run, or "" when it can.
std::string bf16_refusal(const VulkanDeviceInfo& d, const ShaderSet& s) {
  if (d.bf16 != Support::Yes)
    return label(d) + " does not report bf16 arithmetic (VK_KHR_shader_bfloat16: " + std::string(support_name(d.bf16)) +
           ")";
  if (!s.bf16_arithmetic) return "this build has no bf16-arithmetic shader (Debian 12's glslc rejects GL_EXT_bfloat16)";
  return "";
}

std::string f16_refusal(const VulkanDeviceInfo& d, const ShaderSet& s) {
  if (!d.shader_float16) return label(d) + " does not report f16 arithmetic (shaderFloat16)";
  if (!d.storage_16bit) return label(d) + " cannot load 16-bit words from buffers (storageBuffer16BitAccess)";
  if (!s.f16_arithmetic) return "this build has no f16-arithmetic shader";
  return "";
}

void resolve_compute(const VulkanDeviceInfo& d, NumFormat checkpoint, std::optional<NumFormat> request,
                     const ShaderSet& s, GpuPolicy& p) {
  if (request) {
    const NumFormat c = *request;
    if (c != NumFormat::F32 && c != NumFormat::F16 && c != NumFormat::BF16)
      throw Error("--compute " + name(c) + ": a GPU computes in f32, f16 or bf16");
    const std::string why = c == NumFormat::BF16 ? bf16_refusal(d, s) : c == NumFormat::F16 ? f16_refusal(d, s) : "";
    // Refused, not emulated: emulated bf16 is the silent slowdown lesson 1 is about.
    if (!why.empty()) throw Error("--compute " + name(c) + " refused: " + why + "; use --compute f32");
    p.compute = c;
    p.compute_reason = "compute " + name(c) + ": requested; native on " + label(d) +
                       (c == NumFormat::F16 ? " (shaderFloat16): the weight products multiply in f16 and sum in f32; "
                                              "norms, softmax, attention and RoPE stay f32"
                                            : "");
    return;
  }
  const std::string bf16_no = bf16_refusal(d, s);
  if (checkpoint == NumFormat::BF16 && bf16_no.empty()) {
    p.compute = NumFormat::BF16;
    p.compute_reason = "compute bf16: bf16 checkpoint and " + label(d) + " reports bf16 arithmetic";
    return;
  }
  p.compute = NumFormat::F32;
  if (checkpoint == NumFormat::BF16)
    p.compute_reason = "compute f32: " + bf16_no + "; bf16 weights are widened to f32 in the shader";
  else if (f16_refusal(d, s).empty())
    p.compute_reason = "compute f32: the shaders multiply and accumulate in f32, the reference's arithmetic "
                       "(--compute f16 runs natively here: f16 products, f32 sums)";
  else
    p.compute_reason = "compute f32: the shaders multiply and accumulate in f32";
}

void resolve_weights(const VulkanDeviceInfo& d, NumFormat checkpoint, GpuPolicy& p) {
  if (checkpoint == NumFormat::BF16) {
    p.weights = NumFormat::BF16;
    p.widened_in_shader = p.compute != NumFormat::BF16;
    p.weights_reason = p.widened_in_shader
                           ? "weights bf16: kept as 16-bit words and widened to f32 in the shader (a 16-bit shift)"
                           : "weights bf16: multiplied as bf16";
  } else if (checkpoint == NumFormat::F16 && d.storage_16bit) {
    p.weights = NumFormat::F16;
    p.widened_in_shader = p.compute != NumFormat::F16;
    p.weights_reason = std::string("weights f16: kept as 16-bit words (storageBuffer16BitAccess)") +
                       (p.widened_in_shader ? " and widened to f32 in the shader" : "");
  } else if (checkpoint == NumFormat::F16) {
    p.weights = NumFormat::F32;
    p.weights_reason = "weights f32: " + label(d) + " cannot load 16-bit words, so f16 is widened at load (2x memory)";
  } else if (checkpoint == NumFormat::Q8 || checkpoint == NumFormat::Q4) {
    p.weights = checkpoint;
    p.weights_reason = "weights " + name(checkpoint) + ": kept as their blocks and dequantized to f32 in the shader "
                       "(Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K)";
  } else {
    p.weights = NumFormat::F32;
    p.weights_reason = "weights f32: as the checkpoint stores them";
  }
}
}  // namespace

GpuPolicy resolve_gpu_policy(const VulkanDeviceInfo& device, NumFormat checkpoint, std::optional<NumFormat> compute,
                             const ShaderSet& shaders) {
  GpuPolicy p;
  resolve_compute(device, checkpoint, compute, shaders, p);
  resolve_weights(device, checkpoint, p);
  return p;
}


nlohmann::json gpu_policy_to_json(const GpuPolicy& p) {
  return {{"compute", num_format_name(p.compute)},
          {"weights", num_format_name(p.weights)},
          {"widened_in_shader", p.widened_in_shader},
          {"reasons", {p.compute_reason, p.weights_reason}}};
}

}  // namespace g4::gpu
