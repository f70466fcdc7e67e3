#include <gtest/gtest.h>

#include "gpu/gpu_device.h"
#include "gpu/vulkan/vk_result.h"
#include "platform/error.h"

namespace g4::gpu {

TEST(VulkanResult, FailuresBecomeErrorsNamingTheCallAndTheResult) {
  try {
    vk_check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Vulkan: vkQueueSubmit failed: VK_ERROR_DEVICE_LOST");
  }
  EXPECT_EQ(vk_result_name(VK_ERROR_OUT_OF_DEVICE_MEMORY), "VK_ERROR_OUT_OF_DEVICE_MEMORY");
  EXPECT_NO_THROW(vk_check(VK_SUCCESS, "anything"));
}

// On lavapipe the probe must read what vulkaninfo reports there (docs/gpu.md); on other devices
// only what any conformant Vulkan 1.1 compute device has.
TEST(VulkanProbe, ReadsEachDevicesLimits) {
  const VulkanProbe probe = probe_vulkan();
  if (probe.state != ProbeState::Found) GTEST_SKIP() << "no Vulkan device: " << probe.message;
  for (const VulkanDeviceInfo& d : probe.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.max_shared_memory_bytes, 16384u) << d.name;  // the spec's minimum
    EXPECT_GE(d.subgroup_size, 1u) << d.name;
    EXPECT_FALSE(d.heaps.empty()) << d.name;
    if (d.driver_name != "llvmpipe") continue;
    EXPECT_EQ(d.type, GpuType::Cpu);
    EXPECT_EQ(d.max_shared_memory_bytes, 32768u);
    EXPECT_EQ(d.subgroup_size, 8u);
    EXPECT_EQ(d.max_storage_buffer_range, 128u << 20);
    EXPECT_TRUE(d.shader_float16 && d.shader_int8 && d.storage_16bit);
    EXPECT_EQ(d.bf16, Support::No);
    EXPECT_FALSE(d.cooperative_matrix_khr || d.cooperative_matrix_nv);
  }
}

}  // namespace g4::gpu
