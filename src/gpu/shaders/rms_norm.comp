#version 450
// out[r] = in[r] / sqrt(mean(in[r]^2) + eps) [* w], one workgroup per row of width n; in and out
// may be the same buffer (each thread rewrites only the elements it read).
// Shared memory: WG floats for the sum's tree reduction (planned on the host: WG * 4 bytes).
layout(constant_id = 0) const uint WG = 64;  // a power of two
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint rows; uint n; float eps; uint weighted; } p;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

shared float part[WG];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    const uint base = r * p.n;
    float s = 0.0;
    for (uint i = tid; i < p.n; i += WG) s += x[base + i] * x[base + i];
    part[tid] = s;
    barrier();
    for (uint half_ = WG / 2; half_ > 0; half_ /= 2) {
      if (tid < half_) part[tid] += part[tid + half_];
      barrier();
    }
    const float inv = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
    barrier();  // everyone has read part[0] before the next row overwrites it
    // Each thread writes only the elements it read for the sum, so in == out is safe.
    for (uint i = tid; i < p.n; i += WG) y[base + i] = p.weighted != 0 ? (x[base + i] * inv) * w[i] : x[base + i] * inv;
  }
}
