// y[T, N] = x[T, K] * W[N, K]^T on a Vulkan device with matmul.comp: the first real pipeline,
// end to end (staging upload, one command buffer, timestamped dispatch, readback). The forward
// pass will keep weights resident instead of uploading them per call; this is the foundation
// and the check that the planner's tile, the shader and the device agree.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "gpu/shader_tiles.h"
#include "gpu/vulkan/vk_session.h"

namespace g4::gpu {

// How W's values are laid out in memory: f32, or 16-bit words (f16, or bf16 widened by a shift).
enum class WeightWords : uint8_t { F32, F16, BF16 };

struct MatmulRun {
  std::vector<float> y;                  // T x N
  std::optional<double> device_seconds;  // the dispatch, by timestamps; nullopt without them
};

// `w` holds N * K values in `words`. `compute_f16`: the COMPUTE_F16 variant (each product of x
// and w rounded to f16 operands and multiplied in f16, summed in f32; product.glsl). Throws
// g4::Error: f16 words on a device without 16-bit storage, f16 compute without shaderFloat16, a
// tile the device cannot run (shared memory, workgroup size), a buffer over
// maxStorageBufferRange, or a failing Vulkan call (by its VkResult).
MatmulRun run_matmul(const VulkanSession& session, const MatmulTile& tile, WeightWords words, const void* w,
                     const float* x, uint32_t T, uint32_t N, uint32_t K, bool compute_f16 = false);

}  // namespace g4::gpu
