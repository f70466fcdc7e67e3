// The Vulkan part of g4 device: every Vulkan device beside the CPU with its probe, the GPU dtype
// policy per checkpoint format (with reasons) and each shader's planned tile against the
// device's shared memory, or one line saying why there is no device (no loader, no driver, or
// a build without Vulkan).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/gpu_device.h"
#include "platform/dtype_policy.h"

namespace g4::cli {

std::string describe_vulkan(const gpu::VulkanProbe& probe, const std::vector<NumFormat>& checkpoints);
nlohmann::json vulkan_to_json(const gpu::VulkanProbe& probe, const std::vector<NumFormat>& checkpoints);

}  // namespace g4::cli
