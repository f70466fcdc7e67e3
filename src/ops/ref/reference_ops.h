// Reference kernels: plain f32 loops, the numerical spec that every fast kernel is tested against.
// Weights are read in their stored dtype (F32/F16/BF16) and widened to f32 one row at a time;
// nothing is upcast as a whole. Accumulation is always f32.
#pragma once
#include <cstdint>
#include <vector>

#include "platform/tensor_view.h"

namespace g4::ref {

// y[T, out] = x[T, in] · W[out, in]ᵀ   (W in HF [out, in] layout). Block-quantized W (Q8_0,
// Q4_K, ...) is read block by block through ops::dot_row, never dequantized as a whole.
void matmul(const float* x, int64_t T, const TensorView& w, float* y);

// Dot product with a fixed summation order (8 interleaved partial sums, then pairwise).
float dot(const float* a, const float* b, int64_t n);

// In place over rows of width n: x = x / sqrt(mean(x²) + eps) [* w]. w may be null (no scale).
void rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps);

// gelu_pytorch_tanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
float gelu_tanh(float x);

// In-place softmax over n values (max-subtracted, f32).
void softmax(float* x, int64_t n);

// Rotate-half (NeoX) RoPE: channel j pairs with j + hd/2. inv_freq has hd/2 entries
// (zeros pass their pair through unchanged). x: [n_heads, hd] at position pos.
void rope(float* x, int64_t n_heads, int64_t hd, const std::vector<float>& inv_freq, int64_t pos);
// rope() in its two steps: the angles' cos/sin at pos ([hd/2] each), then the rotation of
// [n_heads, hd] by them. A caller that rotates many rows at one position (every layer's q and k)
// computes the first once; the bits are rope()'s.
void rope_cos_sin(const std::vector<float>& inv_freq, int64_t pos, float* cos, float* sin);
void rope_rotate(float* x, int64_t n_heads, int64_t hd, const float* cos, const float* sin);

// Inverse frequencies for the two RoPE flavours (computed in double, stored f32):
// default:      inv_freq[k] = theta^(-2k/hd), k < hd/2
// proportional: inv_freq[k] = theta^(-2k/hd) for k < int(factor·hd/2) (the denominator is the
//               full hd, not the rotated width), 0 beyond.
std::vector<float> rope_inv_freq_default(int64_t hd, double theta);
std::vector<float> rope_inv_freq_proportional(int64_t hd, double theta, double partial_rotary_factor);

// One query row against n keys/values ([n, kvh, hd]) for all heads; the caller chose the keys
// (causal window applied). out: [nH, hd]. Scaling 1.0, softmax in f32; GQA: query head h reads
// kv head h / (nH / kvh). The spec every attention kernel is tested against.
void attend_row(const float* q, const float* k, const float* v, int64_t n, int64_t nH, int64_t kvh, int64_t hd, float* out);

}  // namespace g4::ref
