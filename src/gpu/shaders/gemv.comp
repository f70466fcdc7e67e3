#version 450
// y[T, out] = x[T, in] * W[out, in]^T for steps of a few rows (decode, a verify step): one
// invocation per output, summing its row of W in order of `in` without the matmul's shared-memory
// tiles, whose rows a one-token step would mostly leave empty. It gives the matmul's bits: the
// same operands, mac'd (product.glsl) into the same running sum in the same order, and (when the
// matmul's last depth tile is partial) the same mac(0, 0, sum) its zero padding applies. So a
// token's logits do not depend on how many rows its step carried. Weight formats, split parts and
// COMPUTE_F16 as matmul.comp.
#extension GL_GOOGLE_include_directive : require
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(WEIGHT_F16) || defined(COMPUTE_F16)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform Shape { uint T; uint N; uint K; uint ldy; uint n0; uint padded; } shape;

layout(std430, binding = 0) readonly buffer X { float x[]; };
#include "weights.glsl"
#include "product.glsl"
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= shape.T * shape.N) return;
  const uint t = e / shape.N, n = e % shape.N;
  float sum = 0.0;
  for (uint k = 0; k < shape.K; ++k) sum = mac(x[t * shape.K + k], weight(n, k, shape.K), sum);
  if (shape.padded != 0) sum = mac(0.0, 0.0, sum);
  y[t * shape.ldy + shape.n0 + n] = sum;
}
