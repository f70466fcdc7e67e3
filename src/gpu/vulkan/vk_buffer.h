// A Vulkan buffer with its own memory: device-local for shader data, host-visible (mapped) for
// staging copies in and out. One allocation per buffer is enough for the one pipeline built so
// far; a suballocator comes with the forward pass's many tensors.
#pragma once
#include <cstdint>

#include "gpu/vulkan/vk_session_impl.h"

namespace g4::gpu {

class DeviceBuffer {
 public:
  enum class Place : uint8_t { Device, HostStaging };
  // Throws g4::Error: a storage buffer larger than maxStorageBufferRange (with both figures; big
  // tensors must be split), or a failed allocation by its VkResult (out of device memory).
  DeviceBuffer(const VulkanSession& session, uint64_t bytes, Place place);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  void* mapped() const { return mapped_; }  // HostStaging only

 private:
  void release();  // what the constructor made so far, or all of it

  const VulkanSession::Impl& s_;
  uint64_t bytes_ = 0;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
};

}  // namespace g4::gpu
