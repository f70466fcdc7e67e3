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
// scores[t, h, j] = q[t, h] . k[key j of row t] (scaling 1.0: q_norm and k_norm play its role);
// entries past the row's last key are -inf, so the softmax gives them 0.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
#include "attention_common.glsl"
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { KV_T kc[]; };
layout(std430, binding = 2) writeonly buffer Scores { float scores[]; };

void main() {
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.heads * p.S) return;
  const uint j = e % p.S, h = (e / p.S) % p.heads, t = e / (p.S * p.heads);
  const uint slot = rows[t].x, pos = rows[t].y, key = first_key(pos) + j;
  if (key > pos) {
    scores[e] = uintBitsToFloat(0xff800000u);  // -inf
    return;
  }
  const uint qb = (t * p.heads + h) * p.hd;
  float s = 0.0;
  for (uint d = 0; d < p.hd; ++d) s += q[qb + d] * float(kc[kv_index(slot, key, h, d)]);
  scores[e] = s;
}
