#version 450
// out[t, i] = table[ids[t], i] * scale: the token embedding gather (and the per-layer table's).
// `scale` is the host's sqrt(width) rounded to the table's dtype, as the reference rounds it.
// The table's format is a compile-time variant (weights.glsl). The buffer may be one part of a
// split table, rows row0 .. row0 + rows - 1: a dispatch per part writes the rows of the tokens
// whose ids fall in it and leaves the others alone.
#extension GL_GOOGLE_include_directive : require
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint width; float scale; uint row0; uint rows; } p;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
#include "weights.glsl"
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.width) return;
  const uint t = e / p.width, i = e % p.width, id = ids[t];
  if (id < p.row0 || id - p.row0 >= p.rows) return;  // another part's row
  y[e] = weight(id - p.row0, i, p.width) * p.scale;
}
