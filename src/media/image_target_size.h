// The size an image is resized to before patching (transformers' Gemma 4
// get_aspect_ratio_preserving_size): the largest size that keeps the aspect ratio, has sides
// that are multiples of patch x pooling (48 on released models, so pooling never sees a partial
// window) and holds at most budget x pooling^2 patches. Small images are scaled UP to fill the
// budget; there is no "keep native size" rule (llama.cpp differs there).
#pragma once

namespace g4::media {

// The vision tower's geometry the processor depends on (vision_config: patch_size,
// pooling_kernel_size). Released checkpoints: 16 and 3; the tiny fixtures: 4 and 3.
struct PatchGeometry {
  int patch_size = 16;
  int pooling_kernel = 3;
};

struct ImageSize {
  int height = 0;
  int width = 0;
  bool operator==(const ImageSize&) const = default;
};

// Target (height, width) for a source of height h0, width w0 at the given budget (checked with
// check_image_token_budget). Throws g4::Error for an empty source and for sources so extreme
// that no size fits (transformers raises there too).
ImageSize image_target_size(int h0, int w0, int budget, const PatchGeometry& g = {});

// Soft tokens an image of the given (already target) size becomes: patches / pooling^2.
int image_soft_tokens(ImageSize s, const PatchGeometry& g = {});

}  // namespace g4::media
