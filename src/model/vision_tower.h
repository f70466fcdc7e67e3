// The Gemma 4 vision tower (Gemma4VisionModel) over one image: pixel rows in [0, 1] with their
// patch positions -> pooled features [S, Hv]. Spec: gemma4-vision.md §3.
//
//   x = (2·(px − 0.5)) · input_projᵀ + table[0][x] + table[1][y]      [N, Hv]
//   Lv encoder layers (vision_encoder_layer.h), bidirectional over the N patches
//   y = k x k average pool over the patch grid (raster order) · √Hv    [S = N / k², Hv]
//   y = (y − std_bias) · std_scale                                      (standardize only)
//
// The input is plain rows, so this layer needs nothing from media/ (whose ImagePatches holds
// exactly these fields). Like the text decoder, every primitive runs through a blocks::Exec: the
// f32 reference loops (Exec{}) or the SIMD kernels on a thread pool (Exec with a matmul context).
#pragma once
#include <cstdint>
#include <span>

#include "model/executor.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"

namespace g4 {

// One image's valid patches (no padding rows).
struct VisionInput {
  std::span<const float> pixel_values;  // [N, p·p·3]: values in [0, 1], (row, column, channel) per patch
  std::span<const int32_t> positions;   // [N, 2]: (x, y) = (patch column, patch row)
  int grid_rows = 0;                    // patch grid height; a multiple of k
  int grid_cols = 0;                    // patch grid width; a multiple of k; N == rows · cols
};

// Intermediate results, filled only when asked for (tests compare them with the fixtures).
struct VisionTrace {
  blocks::Vec patch_embeds;  // [N, Hv] before the first layer
  blocks::Vec layer0_out;    // [N, Hv] after layer 0
  blocks::Vec encoder_out;   // [N, Hv] after the last layer
  blocks::Vec pooled;        // [S, Hv] the tower's output (also returned)
};

// Soft tokens per image: N / k².
int64_t vision_soft_tokens(const VisionConfig& c, const VisionInput& in);

// Throws g4::Error naming what is wrong: sizes that disagree with N, a grid side that is not a
// multiple of k or exceeds the position table, a position outside the grid or given twice.
void check_vision_input(const VisionConfig& c, const VisionInput& in);

// The tower: pooled features [S, Hv], S = N / k², in raster order of the pooled grid.
blocks::Vec vision_tower(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, const blocks::Exec& ex,
                         VisionTrace* trace = nullptr);

}  // namespace g4
