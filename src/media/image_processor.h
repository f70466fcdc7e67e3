// Gemma 4's image processor, decoded pixels -> the vision tower's input: target size from the
// token budget (image_target_size.h), antialiased bicubic resize (bicubic_resize.h; skipped when
// the image already has the target size), patches with positions (image_patches.h). Padding to
// max_patches is not done: the tower runs on the valid patches only.
#pragma once
#include "media/image_patches.h"
#include "media/image_target_size.h"
#include "media/rgb_image.h"

namespace g4::media {

struct ProcessedImage {
  RgbImage resized;      // [h, w, 3] at the target size
  ImagePatches patches;  // [N, p*p*3] and [N, 2]
  int soft_tokens = 0;   // N / pooling^2: the <|image|> placeholders this image fills
};

// Throws g4::Error for a budget outside kImageTokenBudgets or an image no size fits.
ProcessedImage preprocess_image(const RgbImage& img, int budget, const PatchGeometry& g = {});

}  // namespace g4::media
