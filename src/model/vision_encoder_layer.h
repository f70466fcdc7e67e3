// One layer of the Gemma 4 vision encoder (Gemma4VisionEncoderLayer), over one image's N patches.
// Spec: gemma4-vision.md §3.4-3.7. Shapes: N patches, Hv hidden, nh / nkv heads, d head dim.
//
//   h = input_norm(x);  q, k, v = clip_linear(h)                 [N, nh·d], [N, nkv·d]
//   q = rope2d(q_norm(q)), k = rope2d(k_norm(k)), v = RMSNorm(v)  (v_norm has no weight)
//   a = softmax(q·kᵀ · 1.0) · v over every patch of the image     (bidirectional, no window)
//   x += post_attention_norm(clip_linear(o, a))
//   x += post_feedforward_norm(down(gelu_tanh(gate(h')) · up(h'))),  h' = pre_feedforward_norm(x)
//
// clip_linear clamps its input and output when the tower has use_clipped_linears.
#pragma once
#include <cstdint>
#include <span>

#include "model/executor.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"

namespace g4 {

// The 2-D RoPE of one image, the same for every layer: channels [0, d/2) of each head rotate by
// the patch column x, [d/2, d) by the patch row y, each half NeoX-paired (j with j + d/4) with its
// own ladder inv_freq[i] = θ^(−2i/(d/2)), i < d/4.
struct VisionRope {
  int64_t quarter = 0;          // d/4 angles per axis
  blocks::Vec cos_x, sin_x;     // [N, d/4] at each patch's x
  blocks::Vec cos_y, sin_y;     // [N, d/4] at each patch's y
  VisionRope(const VisionConfig& c, std::span<const int32_t> positions);
  // Rotates rows [b, e) of x [N, heads, d] in place.
  void apply(float* x, int64_t heads, int64_t d, int64_t b, int64_t e) const;
};

// x [N, Hv] in place.
void vision_encoder_layer(const VisionConfig& c, const VisionLayerWeights& lw, const VisionRope& rope, blocks::Vec& x,
                          const blocks::Exec& ex);

// y [T, out] = clamp(clamp(x, input bounds) · Wᵀ, output bounds); a plain product when unclipped.
void clipped_product(const float* x, int64_t T, const ClippedLinear& l, float* y, const blocks::Exec& ex);

}  // namespace g4
