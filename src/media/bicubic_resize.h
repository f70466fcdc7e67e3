// Antialiased bicubic resize, the resampling of Gemma 4's default (torchvision) image processor:
// Keys cubic with a = -0.5; when shrinking by s the kernel is stretched to cover 2s source
// pixels on each side (Pillow/torchvision "antialias"), so every source pixel contributes and
// downscaled detail averages instead of aliasing. Taps sit at pixel centres, each output
// pixel's weights are normalised to sum 1, and the arithmetic stays in floating point through
// both passes with one rounding to uint8 at the end (torchvision's order; Pillow instead
// rounds between the passes, which differs by a level or more at clipped edges). Without that
// rounding the passes commute, so the cheaper order is taken.
#pragma once
#include "media/image_target_size.h"
#include "media/rgb_image.h"

namespace g4::media {

// [in.height, in.width, 3] -> [out.height, out.width, 3].
RgbImage resize_bicubic_antialias(const RgbImage& in, ImageSize out);

}  // namespace g4::media
