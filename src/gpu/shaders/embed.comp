#version 450
// out[t, i] = table[ids[t], i] * scale: the token embedding gather (and the per-layer table's).
// `scale` is the host's sqrt(width) rounded to the table's dtype, as the reference rounds it.
// Variants: f32 table, or bf16 words (WEIGHT_BF16, two per uint, widened by a shift).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint width; float scale; } p;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
#ifdef WEIGHT_BF16
layout(std430, binding = 1) readonly buffer Table { uint table[]; };
float value(uint i) { return uintBitsToFloat(((table[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu) << 16); }
#else
layout(std430, binding = 1) readonly buffer Table { float table[]; };
float value(uint i) { return table[i]; }
#endif
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.width) return;
  const uint t = e / p.width, i = e % p.width;
  y[e] = value(ids[t] * p.width + i) * p.scale;
}
