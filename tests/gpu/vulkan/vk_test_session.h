// The first Vulkan device (lavapipe in CI), opened once per test binary, or the reason there is
// none: the Vulkan tests skip by name, saying why, on machines without a loader or driver.
#pragma once
#include <memory>
#include <string>

#include "gpu/gpu_device.h"
#include "gpu/vulkan/vk_session.h"

namespace g4::gpu::vk_test {

// One session for the binary: opening a device costs lavapipe a few milliseconds each time.
inline const VulkanSession* session_or_skip_reason(std::string& why) {
  static std::unique_ptr<VulkanSession> session;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const VulkanProbe probe = probe_vulkan();
    if (probe.state != ProbeState::Found) reason = probe.message;
    else session = std::make_unique<VulkanSession>(0);
  }
  why = reason;
  return session.get();
}

}  // namespace g4::gpu::vk_test

#define OPEN_OR_SKIP(s)                                                                                     \
  std::string skip_reason;                                                                               \
  const VulkanSession* s = ::g4::gpu::vk_test::session_or_skip_reason(skip_reason);                          \
  if (!s) GTEST_SKIP() << "no Vulkan device (" << skip_reason << "); install mesa-vulkan-drivers for lavapipe"
