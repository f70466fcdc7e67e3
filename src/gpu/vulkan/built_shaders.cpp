// What this build's embedded shaders compute in (cmake/g4_vulkan.cmake): the weight products
// also come as COMPUTE_F16 variants (f16 products summed in f32); no bf16-arithmetic shader
// (Debian 12's glslc rejects GL_EXT_bfloat16).
#include "gpu/gpu_policy.h"

namespace g4::gpu {

ShaderSet built_shaders() { return ShaderSet{.bf16_arithmetic = false, .f16_arithmetic = true}; }

}  // namespace g4::gpu
