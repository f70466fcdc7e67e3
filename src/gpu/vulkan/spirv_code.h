// The compute shaders' SPIR-V, compiled from src/gpu/shaders/*.comp by glslc at build time and
// embedded as words (cmake/g4_vulkan.cmake, cmake/embed_spirv.cmake): nothing is read from disk
// at run time, so a g4 binary runs wherever it is copied.
#pragma once
#include <cstddef>
#include <cstdint>

namespace g4::gpu {

struct SpirvCode {
  const uint32_t* words = nullptr;
  size_t count = 0;  // 32-bit words
};

namespace spirv {
// y = x * W^T with f32 activations and weights stored as f32, f16 or bf16 (matmul.comp variants).
SpirvCode matmul_f32();
SpirvCode matmul_f16();
SpirvCode matmul_bf16();
// The decoder's shaders (src/gpu/shaders/<name>.comp; embed in f32 and bf16-word variants).
SpirvCode embed_f32();
SpirvCode embed_bf16();
SpirvCode rms_norm();
SpirvCode rope();
SpirvCode kv_write();
SpirvCode attention_scores();
SpirvCode attention_values();
SpirvCode softmax();
SpirvCode gelu_mul();
SpirvCode add_scale();
SpirvCode softcap();
SpirvCode moe_route();
SpirvCode moe_matvec_f32();
SpirvCode moe_matvec_bf16();
SpirvCode moe_combine();
}  // namespace spirv

}  // namespace g4::gpu
