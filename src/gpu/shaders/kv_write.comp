#version 450
// Writes the step's k, v [T, width] into a layer's KV buffer [slots, capacity, width]: row t goes
// to its sequence's slot at position pos % capacity (rows[t] = {slot, pos}): a ring for sliding
// layers (capacity = window - 1 + the longest step, so a step never overwrites a key one of its
// own queries still needs), linear for full layers.
// KV_F16: the buffers hold f16 (16-bit storage), each value rounded as it is stored.
#ifdef KV_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define KV_T float16_t
#else
#define KV_T float
#endif
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint width; uint capacity; } p;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer KC { KV_T kc[]; };
layout(std430, binding = 3) writeonly buffer VC { KV_T vc[]; };
layout(std430, binding = 4) readonly buffer Rows { uvec2 rows[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.width) return;
  const uint t = e / p.width, i = e % p.width;
  const uint at = rows[t].x * p.capacity + rows[t].y % p.capacity;
  kc[at * p.width + i] = KV_T(k[e]);
  vc[at * p.width + i] = KV_T(v[e]);
}
