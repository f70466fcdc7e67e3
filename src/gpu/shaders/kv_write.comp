#version 450
// Writes the step's k, v [T, width] into a layer's KV buffer [capacity, width] at slot
// (pos0 + t) % capacity: a ring for sliding layers (capacity = window - 1 + the longest step, so a
// step never overwrites a key one of its own queries still needs), linear for full layers.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint width; uint pos0; uint capacity; } p;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer KC { float kc[]; };
layout(std430, binding = 3) writeonly buffer VC { float vc[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.width) return;
  const uint t = e / p.width, i = e % p.width;
  const uint slot = (p.pos0 + t) % p.capacity;
  kc[slot * p.width + i] = k[e];
  vc[slot * p.width + i] = v[e];
}
