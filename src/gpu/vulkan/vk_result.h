// Vulkan results as g4 errors: every failing call becomes a g4::Error naming the call and the
// VkResult by its name (VK_ERROR_DEVICE_LOST, VK_ERROR_OUT_OF_DEVICE_MEMORY), so the frontends
// print one clear line and the server can stay up.
#pragma once
#include <string_view>

#include <vulkan/vulkan.h>

namespace g4::gpu {

std::string_view vk_result_name(VkResult r);  // "VK_ERROR_DEVICE_LOST"; "VkResult <n>" when unknown

// Throws g4::Error("Vulkan: <what> failed: <name>") unless r is VK_SUCCESS.
void vk_check(VkResult r, std::string_view what);

}  // namespace g4::gpu
