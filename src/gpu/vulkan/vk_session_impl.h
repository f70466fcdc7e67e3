// VulkanSession's Vulkan objects, for the files that record and submit work (buffers, pipelines).
#pragma once
#include <cstdint>

#include "gpu/vulkan/vk_api.h"
#include "gpu/vulkan/vk_session.h"

namespace g4::gpu {

struct VulkanSession::Impl {
  const VulkanApi* api = nullptr;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory{};

  // A memory type allowed by `type_bits` with all of `want`; throws g4::Error naming `want` if none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const;
};

}  // namespace g4::gpu
