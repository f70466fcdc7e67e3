#version 450
// In-place softmax over rows of n values (max-subtracted, f32), one workgroup per row; -inf
// entries become 0. Shared memory: WG floats for the max and sum reductions (WG * 4 bytes, planned).
layout(constant_id = 0) const uint WG = 64;  // a power of two
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint rows; uint n; } p;
layout(std430, binding = 0) buffer X { float x[]; };

shared float part[WG];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    const uint base = r * p.n;
    float m = uintBitsToFloat(0xff800000u);
    for (uint i = tid; i < p.n; i += WG) m = max(m, x[base + i]);
    part[tid] = m;
    barrier();
    for (uint h = WG / 2; h > 0; h /= 2) {
      if (tid < h) part[tid] = max(part[tid], part[tid + h]);
      barrier();
    }
    m = part[0];
    barrier();
    float s = 0.0;
    for (uint i = tid; i < p.n; i += WG) {
      const float ev = exp(x[base + i] - m);
      x[base + i] = ev;
      s += ev;
    }
    part[tid] = s;
    barrier();
    for (uint h = WG / 2; h > 0; h /= 2) {
      if (tid < h) part[tid] += part[tid + h];
      barrier();
    }
    const float inv = 1.0 / part[0];
    for (uint i = tid; i < p.n; i += WG) x[base + i] *= inv;
    barrier();  // part[0] is read by all before the next row overwrites it
  }
}
