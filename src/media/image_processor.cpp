#include "media/image_processor.h"

#include "media/bicubic_resize.h"

namespace g4::media {

ProcessedImage preprocess_image(const RgbImage& img, int budget, const PatchGeometry& g) {
  const ImageSize target = image_target_size(img.height, img.width, budget, g);
  ProcessedImage out;
  out.resized = target == ImageSize{img.height, img.width} ? img : resize_bicubic_antialias(img, target);
  out.patches = patchify(out.resized, g.patch_size);
  out.soft_tokens = image_soft_tokens(target, g);
  return out;
}

}  // namespace g4::media
