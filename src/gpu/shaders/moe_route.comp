#version 450
// Per token: the top k of E router probabilities (already softmaxed over all experts; ties go to
// the lower index), renormalised over the k, times each expert's per_expert_scale. Writes slot
// t * k + j: its expert id and weight, in selection order (the order the outputs are summed in).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint E; uint K; } p;
layout(std430, binding = 0) readonly buffer Probs { float probs[]; };
layout(std430, binding = 1) readonly buffer Scale { float per_expert[]; };
layout(std430, binding = 2) buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Weights { float weights[]; };

bool taken(uint t, uint j, uint e) {
  for (uint i = 0; i < j; ++i)
    if (ids[t * p.K + i] == e) return true;
  return false;
}

void main() {
  const uint t = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (t >= p.T) return;
  const uint base = t * p.E;
  float sum = 0.0;
  for (uint j = 0; j < p.K; ++j) {
    uint best = 0;
    float best_p = -1.0;  // probabilities are >= 0
    for (uint e = 0; e < p.E; ++e)
      if (probs[base + e] > best_p && !taken(t, j, e)) best = e, best_p = probs[base + e];
    ids[t * p.K + j] = best;
    sum += best_p;
  }
  for (uint j = 0; j < p.K; ++j) {
    const uint e = ids[t * p.K + j];
    weights[t * p.K + j] = probs[base + e] / sum * per_expert[e];
  }
}
