#include "gpu/gpu_presets.h"

#include <string>
#include <utility>

namespace g4::gpu::presets {

namespace {
constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;
constexpr uint32_t api(uint32_t major, uint32_t minor, uint32_t patch) { return (major << 22) | (minor << 12) | patch; }

VulkanDeviceInfo nvidia(std::string name, uint64_t memory, Support bf16) {
  VulkanDeviceInfo d;
  d.name = std::move(name);
  d.driver_name = "NVIDIA";
  d.driver_info = "assumed (no dump of this card)";
  d.vendor_id = 0x10de;
  d.api_version = api(1, 3, 277);
  d.type = GpuType::Discrete;
  d.heaps = {{memory, true}, {64 * kGiB, false}};
  d.max_shared_memory_bytes = 48 * kKiB;
  d.max_storage_buffer_range = 4 * kGiB - 1;
  d.max_allocation_bytes = 4 * kGiB - 1;
  d.max_workgroup_invocations = 1024;
  d.subgroup_size = d.min_subgroup_size = d.max_subgroup_size = 32;
  d.subgroup_size_control = d.compute_full_subgroups = true;
  d.shader_float16 = d.shader_int8 = d.storage_16bit = d.storage_8bit = true;
  d.integer_dot = d.integer_dot_accelerated = true;
  d.bf16 = bf16;
  d.cooperative_matrix_khr = d.cooperative_matrix_nv = true;
  d.timestamps = true;
  d.timestamp_period_ns = 1;
  return d;
}
}  // namespace

VulkanDeviceInfo lavapipe() {
  VulkanDeviceInfo d;
  d.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  d.driver_name = "llvmpipe";
  d.driver_info = "Mesa 22.3.6 (LLVM 15.0.6)";
  d.vendor_id = 0x10005;
  d.driver_version = 1;
  d.api_version = api(1, 3, 230);
  d.type = GpuType::Cpu;
  d.heaps = {{2 * kGiB, true}};
  d.max_shared_memory_bytes = 32 * kKiB;
  d.max_storage_buffer_range = 128 * kMiB;
  d.max_allocation_bytes = 2 * kGiB;
  d.max_workgroup_invocations = 1024;
  d.subgroup_size = d.min_subgroup_size = d.max_subgroup_size = 8;
  d.subgroup_size_control = d.compute_full_subgroups = true;
  d.shader_float16 = d.shader_int8 = d.storage_16bit = d.storage_8bit = true;
  d.integer_dot = true;  // present, but no ...Accelerated property is true
  d.bf16 = Support::No;
  d.timestamps = true;
  d.timestamp_period_ns = 1;
  return d;
}

VulkanDeviceInfo tesla_t4() { return nvidia("Tesla T4", 15 * kGiB, Support::No); }
VulkanDeviceInfo nvidia_l4() { return nvidia("NVIDIA L4", 22 * kGiB, Support::Yes); }
VulkanDeviceInfo nvidia_h100() { return nvidia("NVIDIA H100 80GB HBM3", 80 * kGiB, Support::Yes); }

VulkanDeviceInfo with_shared_memory(VulkanDeviceInfo device, uint64_t bytes) {
  device.max_shared_memory_bytes = bytes;
  return device;
}

}  // namespace g4::gpu::presets
