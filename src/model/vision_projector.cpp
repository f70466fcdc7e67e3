#include "model/vision_projector.h"

namespace g4 {

blocks::Vec project_vision(const VisionConfig& c, const VisionWeights& w, blocks::Vec pooled, const blocks::Exec& ex) {
  const int64_t Hv = c.hidden_size, S = int64_t(pooled.size()) / Hv;
  ex.rms_norm(pooled.data(), S, Hv, nullptr, float(c.rms_norm_eps));  // embedding_pre_projection_norm: no weight
  return ex.linear(pooled, S, *w.embedding_projection);
}

blocks::Vec encode_image(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, const blocks::Exec& ex,
                         VisionTrace* trace) {
  return project_vision(c, w, vision_tower(c, w, in, ex, trace), ex);
}

}  // namespace g4
