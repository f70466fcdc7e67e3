// The Vulkan entry points g4 calls, loaded at run time from the system's loader (libvulkan.so.1)
// with dlopen: a g4 built with Vulkan still starts, and runs on the CPU, on a machine without
// the loader, and `g4 device` can say so instead of the dynamic linker refusing the binary.
// Compiled with VK_NO_PROTOTYPES (cmake/g4_vulkan.cmake), so no call can bypass this table.
#pragma once
#include <string>

#include <vulkan/vulkan.h>

namespace g4::gpu {

// Called before an instance exists (loaded with a null instance).
#define G4_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)             \
  X(vkEnumerateInstanceVersion)

// Everything else, loaded through vkGetInstanceProcAddr of g4's one instance.
#define G4_VK_INSTANCE_FUNCTIONS(X)                                                                         \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                      \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceMemoryProperties) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice)    \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                              \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) \
  X(vkUnmapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)         \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                     \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)    \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool)     \
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdBindPipeline)           \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdCopyBuffer)                     \
  X(vkCmdPipelineBarrier) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkCreateQueryPool)               \
  X(vkDestroyQueryPool) X(vkGetQueryPoolResults) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence)       \
  X(vkWaitForFences)

// A Vulkan info structure zeroed with its sType set (T{sType} trips -Wmissing-field-initializers).
template <typename T>
T vk_info(VkStructureType type) {
  T s{};
  s.sType = type;
  return s;
}

struct VulkanApi {
#define G4_VK_MEMBER(name) PFN_##name name = nullptr;
  G4_VK_GLOBAL_FUNCTIONS(G4_VK_MEMBER)
  G4_VK_INSTANCE_FUNCTIONS(G4_VK_MEMBER)
#undef G4_VK_MEMBER
};

// g4's Vulkan instance: created on first use and kept for the process (drivers are not unloaded
// while their devices may be in use).
struct VulkanInstance {
  VkInstance handle = VK_NULL_HANDLE;
  VulkanApi api;
  uint32_t loader_version = 0;  // vkEnumerateInstanceVersion
};

// The instance, or nullptr with *why set: no loader library, a loader too old for Vulkan 1.1,
// or instance creation failed (no driver). Thread-safe; the first call decides.
const VulkanInstance* vulkan_instance(std::string* why);

}  // namespace g4::gpu
