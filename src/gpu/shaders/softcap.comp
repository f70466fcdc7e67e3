#version 450
// x = cap * tanh(x / cap), the final logit softcap (tanh through exp, as in gelu_mul.comp).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint count; float cap; } p;
layout(std430, binding = 0) buffer X { float x[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.count) return;
  const float y = x[e] / p.cap;
  x[e] = p.cap * (1.0 - 2.0 / (exp(2.0 * y) + 1.0));
}
