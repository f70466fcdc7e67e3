#version 450
// Rotate-half (NeoX) RoPE of x [T, heads, hd] in place: channel k turns with k + hd/2 by the
// angle whose cos/sin the host computed for row t ([T, hd/2] each, the reference's bits; a pair
// with frequency 0 has cos 1, sin 0 and passes through).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint T; uint heads; uint hd; } p;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Cos { float c[]; };
layout(std430, binding = 2) readonly buffer Sin { float s[]; };

void main() {
  const uint half_ = p.hd / 2;
  const uint e = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG + gl_GlobalInvocationID.x;  // 2-D grid past 65535 groups
  if (e >= p.T * p.heads * half_) return;
  const uint k = e % half_, h = (e / half_) % p.heads, t = e / (half_ * p.heads);
  const uint lo = (t * p.heads + h) * p.hd + k;
  const float a = x[lo], b = x[lo + half_];
  const float co = c[t * half_ + k], si = s[t * half_ + k];
  x[lo] = a * co - b * si;
  x[lo + half_] = b * co + a * si;
}
