// Whole-row reductions of the SIMD path (Highway, runtime dispatch): RMSNorm and argmax. Decode
// runs ~250 RMSNorms per E2B token on one thread while the others wait, and greedy sampling scans
// 262144 logits; as scalar loops they were a visible share of a q4 token.
#pragma once
#include <cstdint>

#include "platform/tensor_view.h"

namespace g4::ops {

// Each of `rows` rows of x [rows, n]: x = x / sqrt(mean(x²) + eps) · (w ? w[i] : 1), the
// formula of ref::rms_norm with the mean of squares summed in SIMD lanes (a different order, so
// within f32 rounding of the reference, not bit-equal). w: a weight of shape [n] in any stored
// dtype, or null; another shape throws g4::Error naming the tensor. Each row's result depends on
// that row alone.
void rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps);

// The index of the first largest element of x [n] (n >= 1); NaN never wins; 0 when no element
// is larger than -inf. The same answer as a scalar "strictly greater" scan from index 0.
int64_t argmax(const float* x, int64_t n);

}  // namespace g4::ops
