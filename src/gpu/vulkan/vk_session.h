// One Vulkan device opened for compute: logical device, one compute queue, a command pool. The
// Vulkan objects stay behind Impl (vk_session_impl.h), so callers and tests include no Vulkan
// header. Opening never picks a device on its own: the caller names vulkan:N from probe_vulkan().
#pragma once
#include <cstdint>
#include <memory>

#include "gpu/gpu_device.h"

namespace g4::gpu {

class VulkanSession {
 public:
  // Throws g4::Error: no loader or driver, no device `index`, no compute queue, or a Vulkan call
  // failing (named with its VkResult).
  explicit VulkanSession(uint32_t index);
  ~VulkanSession();
  VulkanSession(const VulkanSession&) = delete;
  VulkanSession& operator=(const VulkanSession&) = delete;

  const VulkanDeviceInfo& info() const { return info_; }

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  VulkanDeviceInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace g4::gpu
