#version 450
// Writes the step's k, v [T, width] into a layer's KV buffer [slots, capacity, width]: row t goes
// to its sequence's slot at position pos % capacity (rows[t] = {slot, pos}): a ring for sliding
// layers (capacity = window - 1 + the longest step, so a step never overwrites a key one of its
// own queries still needs), linear for full layers.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint width; uint capacity; } p;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer KC { float kc[]; };
layout(std430, binding = 3) writeonly buffer VC { float vc[]; };
layout(std430, binding = 4) readonly buffer Rows { uvec2 rows[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.width) return;
  const uint t = e / p.width, i = e % p.width;
  const uint at = rows[t].x * p.capacity + rows[t].y % p.capacity;
  kc[at * p.width + i] = k[e];
  vc[at * p.width + i] = v[e];
}
