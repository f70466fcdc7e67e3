// The GPU dtype policy: what a Vulkan device computes in and how a checkpoint's weights are kept
// in its memory, each choice with its reason (docs/lessons.md, lesson 1: bf16 chosen on a GPU
// that only emulates it silently lost most of decode). Pure: the same device record, checkpoint,
// request and shader set give the same policy, so profiles of GPUs not at hand are tested too.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpu/gpu_device.h"
#include "platform/dtype_policy.h"

namespace g4::gpu {

// What this build's shaders can do beyond f32 arithmetic. Debian 12's glslc rejects
// GL_EXT_bfloat16, so no bf16-arithmetic shader is built: bf16 compute needs both the device and
// the shader (a test passes a shader set with it to check the device side of the rule).
struct ShaderSet {
  bool bf16_arithmetic = false;
  // The weight products' COMPUTE_F16 variants (f16 products summed in f32; product.glsl): built
  // with G4_VULKAN.
  bool f16_arithmetic = false;
};
ShaderSet built_shaders();  // src/gpu/vulkan/built_shaders.cpp, or without_vulkan/ (nothing)

struct GpuPolicy {
  NumFormat compute = NumFormat::F32;  // f32, f16 or bf16 arithmetic in the shaders
  NumFormat weights = NumFormat::F32;  // the format weights keep in device memory
  bool widened_in_shader = false;      // 16-bit weights converted to f32 as a shader loads them
  std::string compute_reason;
  std::string weights_reason;
};

// Throws g4::Error when `compute` asks for arithmetic the device does not report (bf16 without
// VK_KHR_shader_bfloat16, f16 without shaderFloat16 and 16-bit storage) or the build lacks,
// naming the device and what it reported, or for a quantized compute format.
GpuPolicy resolve_gpu_policy(const VulkanDeviceInfo& device, NumFormat checkpoint,
                             std::optional<NumFormat> compute = std::nullopt, const ShaderSet& shaders = built_shaders());

nlohmann::json gpu_policy_to_json(const GpuPolicy& policy);

}  // namespace g4::gpu
