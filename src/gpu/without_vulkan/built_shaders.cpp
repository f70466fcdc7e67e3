// A build without Vulkan (G4_VULKAN=OFF) has no shader at all: beyond f32, nothing.
#include "gpu/gpu_policy.h"

namespace g4::gpu {

ShaderSet built_shaders() { return {}; }

}  // namespace g4::gpu
