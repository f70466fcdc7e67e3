#version 450
// y[T, out] = x[T, in] * W[out, in]^T, one workgroup per BM x BN block of y, stepping over `in`
// BK at a time through shared memory. The tile and workgroup size are specialization constants
// chosen on the host by the tile planner (src/gpu/shader_tiles.h), which also computes the shared
// bytes below: (BM + BN) * (BK + 1) floats. The +1 column keeps threads reading one column of a
// tile on different banks. The weight format is a compile-time variant (weights.glsl: f32, f16,
// bf16 words, or Q8_0/Q4_0/Q4_K/Q6_K blocks); every weight is widened to f32 as the tile is loaded,
// so no integer arithmetic is needed. Products are f32, or with COMPUTE_F16 f16 products summed in
// f32 (product.glsl). The buffer may be one part of a split matrix (whole
// rows): its N rows are columns n0 .. n0 + N - 1 of y, whose rows are ldy wide.
#extension GL_GOOGLE_include_directive : require
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(WEIGHT_F16) || defined(COMPUTE_F16)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint BM = 32;
layout(constant_id = 2) const uint BN = 32;
layout(constant_id = 3) const uint BK = 16;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform Shape { uint T; uint N; uint K; uint ldy; uint n0; } shape;

layout(std430, binding = 0) readonly buffer X { float x[]; };
#include "weights.glsl"
#include "product.glsl"
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared float xs[BM * (BK + 1)];
shared float ws[BN * (BK + 1)];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.y * BM;
  const uint col0 = gl_WorkGroupID.x * BN;
  const uint per_thread = (BM * BN) / WG;  // the host checks WG divides BM * BN
  float acc[(BM * BN) / WG];
  for (uint i = 0; i < per_thread; ++i) acc[i] = 0.0;

  for (uint k0 = 0; k0 < shape.K; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += WG) {
      const uint r = e / BK, kk = e % BK;
      const bool inside = row0 + r < shape.T && k0 + kk < shape.K;
      xs[r * (BK + 1) + kk] = inside ? x[(row0 + r) * shape.K + k0 + kk] : 0.0;
    }
    for (uint e = tid; e < BN * BK; e += WG) {
      const uint c = e / BK, kk = e % BK;
      const bool inside = col0 + c < shape.N && k0 + kk < shape.K;
      ws[c * (BK + 1) + kk] = inside ? weight(col0 + c, k0 + kk, shape.K) : 0.0;
    }
    barrier();
    for (uint i = 0; i < per_thread; ++i) {
      const uint o = tid + i * WG;
      const uint r = o / BN, c = o % BN;
      float sum = acc[i];
      // mac (product.glsl): the same step as gemv.comp's, so the two give the same bits.
      for (uint kk = 0; kk < BK; ++kk) sum = mac(xs[r * (BK + 1) + kk], ws[c * (BK + 1) + kk], sum);
      acc[i] = sum;
    }
    barrier();
  }
  for (uint i = 0; i < per_thread; ++i) {
    const uint o = tid + i * WG;
    const uint r = row0 + o / BN, c = col0 + o % BN;
    if (r < shape.T && c < shape.N) y[r * shape.ldy + shape.n0 + c] = acc[i];
  }
}
