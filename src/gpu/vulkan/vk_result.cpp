#include "gpu/vulkan/vk_result.h"

#include <string>

#include "platform/error.h"

namespace g4::gpu {

std::string_view vk_result_name(VkResult r) {
  switch (r) {
#define G4_VK_RESULT(name) \
  case name: return #name;
    G4_VK_RESULT(VK_SUCCESS)
    G4_VK_RESULT(VK_NOT_READY)
    G4_VK_RESULT(VK_TIMEOUT)
    G4_VK_RESULT(VK_EVENT_SET)
    G4_VK_RESULT(VK_EVENT_RESET)
    G4_VK_RESULT(VK_INCOMPLETE)
    G4_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    G4_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    G4_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    G4_VK_RESULT(VK_ERROR_DEVICE_LOST)
    G4_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    G4_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    G4_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    G4_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    G4_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    G4_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    G4_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    G4_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    G4_VK_RESULT(VK_ERROR_UNKNOWN)
    G4_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    G4_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    G4_VK_RESULT(VK_ERROR_FRAGMENTATION)
    G4_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    G4_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef G4_VK_RESULT
    default: break;
  }
  return "an unnamed VkResult";
}

void vk_check(VkResult r, std::string_view what) {
  if (r == VK_SUCCESS) return;
  std::string name(vk_result_name(r));
  if (name == "an unnamed VkResult") name = "VkResult " + std::to_string(int(r));
  throw Error("Vulkan: " + std::string(what) + " failed: " + name);
}

}  // namespace g4::gpu
