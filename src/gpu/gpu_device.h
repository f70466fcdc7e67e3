// What a Vulkan device reports: the probe record the GPU dtype policy and the shader tile planner
// read (docs/lessons.md, lessons 1 and 2: the dtype and the tiles come from what the device says
// it executes and holds, never from a config). Plain data without Vulkan types, so the policy,
// the planner and their tests build with or without G4_VULKAN, on profiles as well as probes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace g4::gpu {

// VkPhysicalDeviceType, in words.
enum class GpuType : uint8_t { Other, Integrated, Discrete, Virtual, Cpu };
std::string_view gpu_type_name(GpuType t);  // "other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU"

// A capability the driver may report, or that these headers cannot ask about.
enum class Support : uint8_t { No, Yes, Unknown };
std::string_view support_name(Support s);  // "no", "yes", "unknown to this loader"

struct MemoryHeap {
  uint64_t bytes = 0;
  bool device_local = false;
};

struct VulkanDeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices: what vulkan:N names
  std::string name;
  std::string driver_name;  // VkPhysicalDeviceDriverProperties::driverName ("llvmpipe", "NVIDIA")
  std::string driver_info;  // driverInfo ("Mesa 22.3.6 (LLVM 15.0.6)", "550.54.14")
  uint32_t vendor_id = 0;
  uint32_t driver_version = 0;  // raw: its encoding is the vendor's
  uint32_t api_version = 0;     // VK_MAKE_API_VERSION encoding
  GpuType type = GpuType::Other;
  std::vector<MemoryHeap> heaps;
  uint64_t max_shared_memory_bytes = 0;  // maxComputeSharedMemorySize: per workgroup
  uint64_t max_storage_buffer_range = 0;  // largest storage-buffer binding a shader can address
  uint64_t max_allocation_bytes = 0;      // maxMemoryAllocationSize
  uint32_t max_workgroup_invocations = 0;
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0;  // subgroup size control's range (equal to subgroup_size without it)
  uint32_t max_subgroup_size = 0;
  bool subgroup_size_control = false;
  bool compute_full_subgroups = false;
  bool shader_float16 = false;  // f16 arithmetic in shaders
  bool shader_int8 = false;     // int8 arithmetic in shaders
  bool storage_16bit = false;   // storageBuffer16BitAccess: 16-bit words loaded and stored
  bool storage_8bit = false;    // storageBuffer8BitAccess
  bool integer_dot = false;     // VK_KHR_shader_integer_dot_product's feature
  bool integer_dot_accelerated = false;  // integerDotProduct4x8BitPackedSignedAccelerated
  Support bf16 = Support::No;   // VK_KHR_shader_bfloat16 shaderBFloat16Type
  bool cooperative_matrix_khr = false;  // VK_KHR_cooperative_matrix listed
  bool cooperative_matrix_nv = false;   // VK_NV_cooperative_matrix listed
  bool timestamps = false;      // the compute queue's timestampValidBits > 0
  float timestamp_period_ns = 0;
  std::vector<std::string> notes;  // what the probe could not ask, or saw and did not expect

  std::string api_version_text() const;  // "1.3.230"
  uint64_t device_local_bytes() const;   // the largest device-local heap
};

// What asking the system gave: devices, or why there are none.
// NoLoader: no libvulkan.so.1, or no instance could be made (the loader found no driver).
enum class ProbeState : uint8_t { NotBuilt, NoLoader, NoDevice, Found };
struct VulkanProbe {
  ProbeState state = ProbeState::NotBuilt;
  std::string message;  // one line: why no device, or the loader's instance version
  std::vector<VulkanDeviceInfo> devices;
};

// Every Vulkan device on this machine, or the reason there is none. Never throws: a machine
// without a loader or a GPU is an ordinary CPU machine (G4_VULKAN=OFF: NotBuilt).
VulkanProbe probe_vulkan();

std::string describe_vulkan_device(const VulkanDeviceInfo& d);  // multi-line, for g4 device
nlohmann::json vulkan_device_to_json(const VulkanDeviceInfo& d);

}  // namespace g4::gpu
