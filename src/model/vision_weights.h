// VisionWeights: the Gemma 4 vision tower's and projector's tensors (`model.vision_tower.*`,
// `model.embed_vision.*`), bound by name from a checkpoint and checked against the VisionConfig
// (presence and exact shape) before anything runs. Views point into the checkpoint's mmaps; the
// clipped linears' bounds (0-d tensors) are read into floats. Spec: gemma4-vision.md §3, §4, §6.1.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "model/vision_config.h"
#include "platform/tensor_view.h"

namespace g4 {

// A linear of the encoder (Gemma4ClippableLinear): y = clamp(clamp(x, in) · Wᵀ, out). Without
// use_clipped_linears the bounds stay infinite and `clipped` false: a plain product.
struct ClippedLinear {
  const TensorView* weight = nullptr;  // [out, in]
  bool clipped = false;
  float input_min = -std::numeric_limits<float>::infinity();
  float input_max = std::numeric_limits<float>::infinity();
  float output_min = -std::numeric_limits<float>::infinity();
  float output_max = std::numeric_limits<float>::infinity();
};

struct VisionLayerWeights {
  // Sandwich norms (weighted RMSNorm, y·w), [Hv] each.
  const TensorView* input_norm = nullptr;
  const TensorView* post_attention_norm = nullptr;
  const TensorView* pre_feedforward_norm = nullptr;
  const TensorView* post_feedforward_norm = nullptr;
  ClippedLinear q_proj;  // [nh·d, Hv]
  ClippedLinear k_proj;  // [nkv·d, Hv]
  ClippedLinear v_proj;  // [nkv·d, Hv]
  ClippedLinear o_proj;  // [Hv, nh·d]
  const TensorView* q_norm = nullptr;  // [d]
  const TensorView* k_norm = nullptr;  // [d]  (v_norm has no weight)
  ClippedLinear gate_proj;  // [Iv, Hv]
  ClippedLinear up_proj;    // [Iv, Hv]
  ClippedLinear down_proj;  // [Hv, Iv]
};

struct VisionWeights {
  const TensorView* input_proj = nullptr;      // [Hv, 3p²], columns in (row, column, channel) order
  const TensorView* position_table = nullptr;  // [2, P, Hv]: [0] by patch column x, [1] by patch row y
  std::vector<VisionLayerWeights> layers;      // Lv
  const TensorView* std_bias = nullptr;        // [Hv]; only with standardize
  const TensorView* std_scale = nullptr;       // [Hv]; only with standardize
  const TensorView* embedding_projection = nullptr;  // [H, Hv]: the projector (embed_vision)

  uint64_t bound_bytes = 0;  // bytes of every bound tensor
  uint64_t parameter_count = 0;
  std::vector<std::string> notes;
};

// `tensors` is every tensor of the checkpoint by name (text tensors are left alone); `source`
// names it in errors; `text_hidden` is H, the projector's output width. Tensors sit under
// "model." (or at the top level). Throws g4::Error naming the tensor with the expected and found
// shape, a missing tensor, or a vision tensor the config does not account for.
VisionWeights bind_vision_weights(const VisionConfig& c, int64_t text_hidden,
                                  const std::map<std::string, TensorView>& tensors, const std::string& source);

}  // namespace g4
