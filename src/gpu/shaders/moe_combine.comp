#version 450
// out[t, i] = sum_j weight[t, j] * y[t * k + j, i]: each token's experts, in its selection order.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint H; uint K; } p;
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.H) return;
  const uint t = e / p.H, i = e % p.H;
  float acc = 0.0;
  for (uint j = 0; j < p.K; ++j) acc += weights[t * p.K + j] * y[(t * p.K + j) * p.H + i];
  o[e] = acc;
}
