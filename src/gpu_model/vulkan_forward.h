// Opening a Vulkan device for the engine: the one call the frontends make, in builds with and
// without Vulkan (G4_VULKAN=OFF: it throws saying so). The returned StepForward owns the device
// session and the GPU decoder with the model's weights resident.
#pragma once
#include <cstdint>
#include <memory>

#include "gpu/vulkan/vk_decoder.h"
#include "model/model.h"
#include "model/step_forward.h"

namespace g4 {

// Opens vulkan:`index` and uploads `m`'s weights. Throws g4::Error naming what refused: no
// loader or device, a weight or buffer over the device's limits (with the bytes), a dtype
// without a shader, or tiles the device's shared memory cannot hold.
std::unique_ptr<StepForward> open_vulkan_forward(const Model& m, uint32_t index, gpu::GpuDecoderLimits limits);

}  // namespace g4
