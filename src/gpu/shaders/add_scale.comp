#version 450
// x[i] = (x[i] + y[i]) * scale, or x[i] * scale without y (has_y 0): residual adds, the layer
// scalar that multiplies the whole stream after a layer's last add, and plain scales.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint count; uint has_y; float scale; } p;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.count) return;
  const float v = p.has_y != 0 ? x[e] + y[e] : x[e];
  x[e] = v * p.scale;
}
