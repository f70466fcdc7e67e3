#version 450
#extension GL_GOOGLE_include_directive : require
// KV_F16: the KV buffers hold f16, widened as they are read.
#ifdef KV_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define KV_T float16_t
#else
#define KV_T float
#endif
// out[t, h, d] = sum_j probs[t, h, j] * v[key j of row t][d], over the row's keys only.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
#include "attention_common.glsl"
layout(std430, binding = 0) readonly buffer Probs { float probs[]; };
layout(std430, binding = 1) readonly buffer VC { KV_T vc[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.heads * p.hd) return;
  const uint d = e % p.hd, h = (e / p.hd) % p.heads, t = e / (p.hd * p.heads);
  const uint slot = rows[t].x, pos = rows[t].y, first = first_key(pos), n = pos - first + 1;
  const uint pb = (t * p.heads + h) * p.S;
  float acc = 0.0;
  for (uint j = 0; j < n; ++j) acc += probs[pb + j] * float(vc[kv_index(slot, first + j, h, d)]);
  o[e] = acc;
}
