#include "gpu/vulkan/vk_session.h"

#include <vector>

#include "gpu/vulkan/vk_result.h"
#include "gpu/vulkan/vk_session_impl.h"
#include "platform/error.h"

namespace g4::gpu {

namespace {
uint32_t compute_family(const VulkanApi& api, VkPhysicalDevice pd, const std::string& name) {
  uint32_t n = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
  for (uint32_t i = 0; i < n; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  throw Error("Vulkan: " + name + " has no compute queue");
}

// Enables only what the shaders use and the device reports: 16-bit storage for f16 weights.
VkDevice create_device(const VulkanApi& api, VkPhysicalDevice pd, uint32_t family, const VulkanDeviceInfo& info) {
  const float priority = 1.0f;
  auto queue = vk_info<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue.queueFamilyIndex = family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  auto s16 = vk_info<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
  s16.storageBuffer16BitAccess = info.storage_16bit ? VK_TRUE : VK_FALSE;
  auto create = vk_info<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  create.pNext = &s16;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  VkDevice device = VK_NULL_HANDLE;
  vk_check(api.vkCreateDevice(pd, &create, nullptr, &device), "vkCreateDevice (" + info.name + ")");
  return device;
}
}  // namespace

uint32_t VulkanSession::Impl::memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
    if ((type_bits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & want) == want) return i;
  throw Error("Vulkan: no memory type with property flags " + std::to_string(want) + " for this buffer");
}

VulkanSession::VulkanSession(uint32_t index) : impl_(std::make_unique<Impl>()) {
  VulkanProbe probe = probe_vulkan();
  if (probe.state != ProbeState::Found) throw Error("Vulkan: " + probe.message);
  if (index >= probe.devices.size())
    throw Error("Vulkan: no device vulkan:" + std::to_string(index) + " (" + probe.message + ")");
  info_ = probe.devices[index];
  const VulkanInstance* vk = vulkan_instance(nullptr);
  Impl& s = *impl_;
  s.api = &vk->api;
  uint32_t n = 0;
  s.api->vkEnumeratePhysicalDevices(vk->handle, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  s.api->vkEnumeratePhysicalDevices(vk->handle, &n, pds.data());
  s.physical = pds.at(index);
  s.queue_family = compute_family(*s.api, s.physical, info_.name);
  s.device = create_device(*s.api, s.physical, s.queue_family, info_);
  s.api->vkGetDeviceQueue(s.device, s.queue_family, 0, &s.queue);
  s.api->vkGetPhysicalDeviceMemoryProperties(s.physical, &s.memory);
  auto pool = vk_info<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = s.queue_family;
  const VkResult r = s.api->vkCreateCommandPool(s.device, &pool, nullptr, &s.pool);
  if (r != VK_SUCCESS) {
    s.api->vkDestroyDevice(s.device, nullptr);
    vk_check(r, "vkCreateCommandPool");
  }
}

VulkanSession::~VulkanSession() {
  Impl& s = *impl_;
  s.api->vkDestroyCommandPool(s.device, s.pool, nullptr);
  s.api->vkDestroyDevice(s.device, nullptr);
}

}  // namespace g4::gpu
