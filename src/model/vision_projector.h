// The Gemma 4 multimodal projector (embed_vision = Gemma4MultimodalEmbedder): the tower's pooled
// features -> soft tokens in the text decoder's hidden space, which the decoder takes as they
// are at the <|image|> positions (no √H). Spec: gemma4-vision.md §4.
#pragma once
#include "model/executor.h"
#include "model/vision_config.h"
#include "model/vision_tower.h"
#include "model/vision_weights.h"

namespace g4 {

// soft [S, H] = RMSNorm_noweight(pooled; vision rms_norm_eps) · embedding_projectionᵀ, pooled [S, Hv].
blocks::Vec project_vision(const VisionConfig& c, const VisionWeights& w, blocks::Vec pooled, const blocks::Exec& ex);

// The tower then the projector: one image's soft tokens [S, H], S = vision_soft_tokens(c, in).
blocks::Vec encode_image(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, const blocks::Exec& ex,
                         VisionTrace* trace = nullptr);

}  // namespace g4
