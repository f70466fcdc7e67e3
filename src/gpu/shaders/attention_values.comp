#version 450
#extension GL_GOOGLE_include_directive : require
// out[t, h, d] = sum_j probs[t, h, j] * v[key j of row t][d], over the row's keys only.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
#include "attention_common.glsl"
layout(std430, binding = 0) readonly buffer Probs { float probs[]; };
layout(std430, binding = 1) readonly buffer VC { float vc[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.heads * p.hd) return;
  const uint d = e % p.hd, h = (e / p.hd) % p.heads, t = e / (p.hd * p.heads);
  const uint slot = rows[t].x, pos = rows[t].y, first = first_key(pos), n = pos - first + 1;
  const uint pb = (t * p.heads + h) * p.S;
  float acc = 0.0;
  for (uint j = 0; j < n; ++j) acc += probs[pb + j] * vc[kv_index(slot, first + j, h, d)];
  o[e] = acc;
}
