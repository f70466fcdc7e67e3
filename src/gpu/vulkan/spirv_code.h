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
// The shaders that read weights, one variant per weight format (src/gpu/shaders/weights.glsl):
// y = x * W^T (matmul.comp, and gemv.comp for steps of a few rows), the embedding gather (embed.comp) and the experts' products
// (moe_matvec.comp) over f32, f16 or bf16 values or Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K blocks.
#define G4_WEIGHT_VARIANTS(shader)                                                                 \
  SpirvCode shader##_f32();                                                                        \
  SpirvCode shader##_f16();                                                                        \
  SpirvCode shader##_bf16();                                                                       \
  SpirvCode shader##_q8_0();                                                                       \
  SpirvCode shader##_q4_0();                                                                       \
  SpirvCode shader##_q4_1();                                                                       \
  SpirvCode shader##_q4_k();                                                                       \
  SpirvCode shader##_q5_k();                                                                       \
  SpirvCode shader##_q6_k();
G4_WEIGHT_VARIANTS(matmul)
G4_WEIGHT_VARIANTS(gemv)
G4_WEIGHT_VARIANTS(embed)
G4_WEIGHT_VARIANTS(moe_matvec)
// The three products again with COMPUTE_F16 (f16 products summed in f32, product.glsl).
G4_WEIGHT_VARIANTS(matmul_c16)
G4_WEIGHT_VARIANTS(gemv_c16)
G4_WEIGHT_VARIANTS(moe_matvec_c16)
#undef G4_WEIGHT_VARIANTS
// The decoder's other shaders (src/gpu/shaders/<name>.comp).
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
SpirvCode moe_combine();
SpirvCode kv_write_f16();  // the same three over an f16 KV cache
SpirvCode attention_scores_f16();
SpirvCode attention_values_f16();
}  // namespace spirv

}  // namespace g4::gpu
