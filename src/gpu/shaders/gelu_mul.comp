#version 450
// a[r, i] = gelu_tanh(a[r, i]) * b[r * b_stride + b_offset + i] over rows of width n: the gated
// MLP (b = up, stride n) and the per-layer-embedding gate (b = the layer's [P] slice of [T, L, P]).
// tanh is written through exp so its precision is exp's, not an implementation's tanh.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint rows; uint n; uint b_stride; uint b_offset; } p;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };

float tanh_exp(float y) { return 1.0 - 2.0 / (exp(2.0 * y) + 1.0); }

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.rows * p.n) return;
  const uint r = e / p.n, i = e % p.n;
  const float x = a[e];
  const float g = 0.5 * x * (1.0 + tanh_exp(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  a[e] = g * b[r * p.b_stride + p.b_offset + i];
}
