// SIMD element-wise activations (Highway, runtime dispatch), tested against the reference ops.
// Decode and prefill spend a tenth of their time in libm's tanh on the MLP width otherwise.
#pragma once
#include <cstddef>

namespace g4::ops {

// g[i] = gelu_tanh(g[i]) · (u ? u[i] : 1)   (the gated MLP's activation; u may alias nothing)
void gelu_tanh_mul(float* g, const float* u, size_t n);

// x[i] = cap · tanh(x[i] / cap)   (final logit soft-capping)
void softcap(float* x, size_t n, float cap);

}  // namespace g4::ops
