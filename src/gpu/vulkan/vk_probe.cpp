// probe_vulkan(): one VulkanDeviceInfo per physical device, from properties2/features2 chains.
// Structures newer than a device's API version are chained only where the device reports that
// version or the extension, since a driver may reject structures it does not know.
#include <algorithm>
#include <cstring>
#include <set>

#include "gpu/gpu_device.h"
#include "gpu/vulkan/vk_api.h"
#include "gpu/vulkan/vk_result.h"

namespace g4::gpu {

namespace {
std::set<std::string> device_extensions(const VulkanApi& api, VkPhysicalDevice pd) {
  uint32_t n = 0;
  api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> props(n);
  api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, props.data());
  std::set<std::string> names;
  for (const VkExtensionProperties& p : props) names.insert(p.extensionName);
  return names;
}

GpuType type_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return GpuType::Integrated;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return GpuType::Discrete;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return GpuType::Virtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return GpuType::Cpu;
    default: return GpuType::Other;
  }
}

// Which newer structures a device takes: its API version, or the extension that brought them.
struct Chainable {
  bool driver = false, float16_int8 = false, storage_8bit = false, size_control = false, integer_dot = false;
};

Chainable chainable(uint32_t api_version, const std::set<std::string>& ext) {
  const bool v12 = api_version >= VK_API_VERSION_1_2, v13 = api_version >= VK_API_VERSION_1_3;
  return {v12 || ext.count("VK_KHR_driver_properties") > 0, v12 || ext.count("VK_KHR_shader_float16_int8") > 0,
          v12 || ext.count("VK_KHR_8bit_storage") > 0, v13 || ext.count("VK_EXT_subgroup_size_control") > 0,
          v13 || ext.count("VK_KHR_shader_integer_dot_product") > 0};
}

// Appends s to a pNext chain when `when`.
template <typename S>
void chain_if(bool when, void**& tail, S& s) {
  if (!when) return;
  *tail = &s;
  tail = &s.pNext;
}

void read_properties(const VulkanApi& api, VkPhysicalDevice pd, const std::set<std::string>& ext,
                     VulkanDeviceInfo& d) {
  VkPhysicalDeviceProperties base{};
  api.vkGetPhysicalDeviceProperties(pd, &base);
  const Chainable c = chainable(base.apiVersion, ext);
  auto p2 = vk_info<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto sub = vk_info<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto drv = vk_info<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
  auto ssc = vk_info<VkPhysicalDeviceSubgroupSizeControlProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES);
  auto m3 = vk_info<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  auto dot = vk_info<VkPhysicalDeviceShaderIntegerDotProductProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES);
  void** tail = &p2.pNext;
  chain_if(true, tail, sub);  // subgroup properties and maintenance3 are core in 1.1
  chain_if(true, tail, m3);
  chain_if(c.driver, tail, drv);
  chain_if(c.size_control, tail, ssc);
  chain_if(c.integer_dot, tail, dot);
  api.vkGetPhysicalDeviceProperties2(pd, &p2);
  const VkPhysicalDeviceLimits& l = base.limits;
  d.name = base.deviceName;
  d.vendor_id = base.vendorID;
  d.driver_version = base.driverVersion;
  d.api_version = base.apiVersion;
  d.type = type_of(base.deviceType);
  d.driver_name = drv.driverName[0] ? drv.driverName : "unknown (no VK_KHR_driver_properties)";
  d.driver_info = drv.driverInfo;
  d.max_shared_memory_bytes = l.maxComputeSharedMemorySize;
  d.max_storage_buffer_range = l.maxStorageBufferRange;
  d.max_allocation_bytes = m3.maxMemoryAllocationSize;
  d.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  d.subgroup_size = sub.subgroupSize;
  d.min_subgroup_size = c.size_control ? ssc.minSubgroupSize : sub.subgroupSize;
  d.max_subgroup_size = c.size_control ? ssc.maxSubgroupSize : sub.subgroupSize;
  d.integer_dot_accelerated = c.integer_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
  d.timestamp_period_ns = l.timestampPeriod;
}

void read_features(const VulkanApi& api, VkPhysicalDevice pd, const std::set<std::string>& ext,
                   VulkanDeviceInfo& d) {
  const Chainable c = chainable(d.api_version, ext);
  auto f2 = vk_info<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  auto s16 = vk_info<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
  auto s8 = vk_info<VkPhysicalDevice8BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES);
  auto f16i8 = vk_info<VkPhysicalDeviceShaderFloat16Int8Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES);
  auto ssc = vk_info<VkPhysicalDeviceSubgroupSizeControlFeatures>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES);
  auto dot = vk_info<VkPhysicalDeviceShaderIntegerDotProductFeatures>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES);
  void** tail = &f2.pNext;
  chain_if(true, tail, s16);  // 16-bit storage is core in 1.1, which g4's instance requires
  chain_if(c.storage_8bit, tail, s8);
  chain_if(c.float16_int8, tail, f16i8);
  chain_if(c.size_control, tail, ssc);
  chain_if(c.integer_dot, tail, dot);
  api.vkGetPhysicalDeviceFeatures2(pd, &f2);
  d.storage_16bit = s16.storageBuffer16BitAccess;
  d.storage_8bit = s8.storageBuffer8BitAccess;
  d.shader_float16 = f16i8.shaderFloat16;
  d.shader_int8 = f16i8.shaderInt8;
  d.subgroup_size_control = c.size_control && ssc.subgroupSizeControl;
  d.compute_full_subgroups = c.size_control && ssc.computeFullSubgroups;
  d.integer_dot = c.integer_dot && dot.shaderIntegerDotProduct;
  d.integer_dot_accelerated = d.integer_dot && d.integer_dot_accelerated;
  // Extensions Debian 12's headers (1.3.239) do not define: only their names can be asked.
  d.cooperative_matrix_khr = ext.count("VK_KHR_cooperative_matrix") > 0;
  d.cooperative_matrix_nv = ext.count("VK_NV_cooperative_matrix") > 0;
  if (!ext.count("VK_KHR_shader_bfloat16")) {
    d.bf16 = Support::No;
  } else {
    d.bf16 = Support::Unknown;
    d.notes.push_back("VK_KHR_shader_bfloat16 is listed, but these Vulkan headers (" +
                      std::to_string(VK_HEADER_VERSION) + ") cannot ask for its features: bf16 is treated as absent");
  }
}

void read_memory_and_queues(const VulkanApi& api, VkPhysicalDevice pd, VulkanDeviceInfo& d) {
  VkPhysicalDeviceMemoryProperties mem{};
  api.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    d.heaps.push_back({mem.memoryHeaps[i].size, (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
  uint32_t n = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
  const auto compute = std::find_if(families.begin(), families.end(),
                                    [](const VkQueueFamilyProperties& f) { return f.queueFlags & VK_QUEUE_COMPUTE_BIT; });
  if (compute == families.end()) d.notes.push_back("no compute queue: g4 cannot use this device");
  d.timestamps = compute != families.end() && compute->timestampValidBits > 0;
}
}  // namespace

VulkanProbe probe_vulkan() {
  VulkanProbe probe;
  std::string why;
  const VulkanInstance* vk = vulkan_instance(&why);
  if (!vk) {
    probe.state = ProbeState::NoLoader;
    probe.message = why;
    return probe;
  }
  const VulkanApi& api = vk->api;
  uint32_t n = 0;
  const VkResult r = api.vkEnumeratePhysicalDevices(vk->handle, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (r == VK_SUCCESS && n > 0) api.vkEnumeratePhysicalDevices(vk->handle, &n, pds.data());
  const uint32_t lv = vk->loader_version;
  const std::string loader = "Vulkan loader " + std::to_string(VK_API_VERSION_MAJOR(lv)) + "." +
                             std::to_string(VK_API_VERSION_MINOR(lv)) + "." + std::to_string(VK_API_VERSION_PATCH(lv));
  if (r != VK_SUCCESS || n == 0) {
    probe.state = ProbeState::NoDevice;
    probe.message = loader + ": no Vulkan device" +
                    (r != VK_SUCCESS ? " (vkEnumeratePhysicalDevices: " + std::string(vk_result_name(r)) + ")"
                                     : std::string(" (no driver reports one; lavapipe is Debian's mesa-vulkan-drivers)"));
    return probe;
  }
  probe.state = ProbeState::Found;
  probe.message = loader + ", " + std::to_string(n) + " device" + (n == 1 ? "" : "s");
  for (uint32_t i = 0; i < n; ++i) {
    VulkanDeviceInfo d;
    d.index = i;
    const std::set<std::string> ext = device_extensions(api, pds[i]);
    read_properties(api, pds[i], ext, d);
    read_features(api, pds[i], ext, d);
    read_memory_and_queues(api, pds[i], d);
    probe.devices.push_back(std::move(d));
  }
  return probe;
}

}  // namespace g4::gpu
