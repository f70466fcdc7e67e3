// probe_vulkan() in a build configured with G4_VULKAN=OFF: says so instead of pretending to look.
#include "gpu/gpu_device.h"

namespace g4::gpu {

VulkanProbe probe_vulkan() {
  return {ProbeState::NotBuilt, "this g4 was built without Vulkan (G4_VULKAN=OFF)", {}};
}

}  // namespace g4::gpu
