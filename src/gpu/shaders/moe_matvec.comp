#version 450
// y[s, n] = x[s / x_div] . W[ids[s]][row0 + n] for every routed slot s (token s / k, its expert
// ids[s]): an expert's rows [expert_rows, K] in W [E, expert_rows, K]. The gate_up product reads
// the token's row (x_div = k) at row0 0 (gate) or I_e (up); down reads the slot's own row.
// Weight formats and COMPUTE_F16 as in matmul.comp (weights.glsl, product.glsl). The buffer may
// be one part of a split tensor, experts e0 .. e0 + experts - 1: a dispatch per part writes the
// slots routed to its experts.
#extension GL_GOOGLE_include_directive : require
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(WEIGHT_F16) || defined(COMPUTE_F16)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P {
  uint slots; uint N; uint K; uint x_div; uint row0; uint expert_rows; uint e0; uint experts;
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
#include "weights.glsl"
#include "product.glsl"
layout(std430, binding = 2) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.slots * p.N) return;
  const uint s = e / p.N, n = e % p.N, expert = ids[s];
  if (expert < p.e0 || expert - p.e0 >= p.experts) return;  // another part's expert
  const uint row = (expert - p.e0) * p.expert_rows + p.row0 + n, xb = (s / p.x_div) * p.K;
  float acc = 0.0;
#ifdef COMPUTE_F16
  for (uint k = 0; k < p.K; ++k) acc = mac(x[xb + k], weight(row, k, p.K), acc);  // f16 products, f32 sum
#else
  for (uint k = 0; k < p.K; ++k) acc += x[xb + k] * weight(row, k, p.K);
#endif
  y[e] = acc;
}
