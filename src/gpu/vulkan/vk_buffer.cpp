#include "gpu/vulkan/vk_buffer.h"

#include "gpu/vulkan/vk_result.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4::gpu {

DeviceBuffer::DeviceBuffer(const VulkanSession& session, uint64_t bytes, Place place)
    : s_(session.impl()), bytes_(bytes) {
  const VulkanDeviceInfo& d = session.info();
  if (place == Place::Device && bytes > d.max_storage_buffer_range)
    throw Error("Vulkan: a " + format_bytes(bytes) + " storage buffer exceeds " + d.name + "'s maxStorageBufferRange of " +
                format_bytes(d.max_storage_buffer_range) + " (" + std::to_string(bytes) + " > " +
                std::to_string(d.max_storage_buffer_range) + " bytes)");
  const VulkanApi& api = *s_.api;
  auto info = vk_info<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               (place == Place::Device ? VK_BUFFER_USAGE_STORAGE_BUFFER_BIT : 0);
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(api.vkCreateBuffer(s_.device, &info, nullptr, &buffer_), "vkCreateBuffer");
  VkMemoryRequirements req{};
  api.vkGetBufferMemoryRequirements(s_.device, buffer_, &req);
  const VkMemoryPropertyFlags want = place == Place::Device
                                         ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                                         : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  try {
    auto alloc = vk_info<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = s_.memory_type(req.memoryTypeBits, want);
    vk_check(api.vkAllocateMemory(s_.device, &alloc, nullptr, &memory_),
             "vkAllocateMemory (" + format_bytes(req.size) + ")");
    vk_check(api.vkBindBufferMemory(s_.device, buffer_, memory_, 0), "vkBindBufferMemory");
    if (place == Place::HostStaging)
      vk_check(api.vkMapMemory(s_.device, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
  } catch (...) {
    release();
    throw;
  }
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  const VulkanApi& api = *s_.api;
  if (mapped_) api.vkUnmapMemory(s_.device, memory_);
  if (buffer_) api.vkDestroyBuffer(s_.device, buffer_, nullptr);
  if (memory_) api.vkFreeMemory(s_.device, memory_, nullptr);
  mapped_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
}

}  // namespace g4::gpu
