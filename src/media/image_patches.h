// An image cut into the vision tower's input rows (transformers' convert_image_to_patches):
// p x p squares in raster order over the patch grid (x fastest), each flattened as (row, column,
// channel) with channel fastest, values u8 / 255 in [0, 1]. The tower itself maps them to
// [-1, 1] (2 * (px - 0.5)); applying SigLIP's 0.5/0.5 normalisation here would do it twice.
#pragma once
#include <cstdint>
#include <vector>

#include "media/rgb_image.h"

namespace g4::media {

struct ImagePatches {
  int patches_x = 0;  // grid width  = image width / p
  int patches_y = 0;  // grid height = image height / p
  int patch_size = 0;
  std::vector<float> pixel_values;  // [N = patches_x * patches_y, p * p * 3]
  std::vector<int32_t> positions;   // [N, 2]: (x, y) = (patch column, patch row)

  int count() const { return patches_x * patches_y; }
};

// img sides must be multiples of patch_size (image_target_size guarantees it); throws
// g4::Error otherwise.
ImagePatches patchify(const RgbImage& img, int patch_size);

}  // namespace g4::media
