#version 450
// y[s, n] = x[s / x_div] . W[ids[s]][row0 + n] for every routed slot s (token s / k, its expert
// ids[s]): an expert's rows [expert_rows, K] in W [E, expert_rows, K]. The gate_up product reads
// the token's row (x_div = k) at row0 0 (gate) or I_e (up); down reads the slot's own row.
// Weight variants as in matmul.comp: f32, or bf16 words widened by a shift (WEIGHT_BF16).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint slots; uint N; uint K; uint x_div; uint row0; uint expert_rows; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
#ifdef WEIGHT_BF16
layout(std430, binding = 1) readonly buffer W { uint w[]; };
float weight(uint i) { return uintBitsToFloat(((w[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu) << 16); }
#else
layout(std430, binding = 1) readonly buffer W { float w[]; };
float weight(uint i) { return w[i]; }
#endif
layout(std430, binding = 2) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.slots * p.N) return;
  const uint s = e / p.N, n = e % p.N;
  const uint wb = (ids[s] * p.expert_rows + p.row0 + n) * p.K, xb = (s / p.x_div) * p.K;
  float acc = 0.0;
  for (uint k = 0; k < p.K; ++k) acc += x[xb + k] * weight(wb + k);
  y[e] = acc;
}
