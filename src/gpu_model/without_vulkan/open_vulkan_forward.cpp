#include "gpu_model/vulkan_forward.h"
#include "platform/error.h"

namespace g4 {

std::unique_ptr<StepForward> open_vulkan_forward(const Model&, uint32_t index, gpu::GpuDecoderLimits) {
  throw Error("vulkan:" + std::to_string(index) +
              ": this g4 was built without Vulkan (G4_VULKAN=OFF: libvulkan-dev or glslc were missing at configure)");
}

}  // namespace g4
