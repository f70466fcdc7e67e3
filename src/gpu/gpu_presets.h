// Vulkan device records for devices g4 is planned against but this machine is not: the GPU
// policy and tile planner run on them on every machine. lavapipe's figures were measured with
// vulkaninfo on this project's machines; the NVIDIA ones are what NVIDIA's Vulkan drivers report
// for their siblings (48 KiB per workgroup, subgroup 32), assumed until a run on the card itself.
#pragma once
#include <cstdint>

#include "gpu/gpu_device.h"

namespace g4::gpu::presets {

VulkanDeviceInfo lavapipe();     // Mesa 22.3 llvmpipe: Vulkan 1.3, 32 KiB, subgroup 8, 128 MiB range, f16+int8, no bf16
VulkanDeviceInfo tesla_t4();     // Turing: 48 KiB, subgroup 32, f16, no bf16
VulkanDeviceInfo nvidia_l4();    // Ada: as T4 plus bf16
VulkanDeviceInfo nvidia_h100();  // Hopper: as L4, 80 GiB
// `device` with another shared-memory limit (tile planner tests).
VulkanDeviceInfo with_shared_memory(VulkanDeviceInfo device, uint64_t bytes);

}  // namespace g4::gpu::presets
