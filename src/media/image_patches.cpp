#include "media/image_patches.h"

#include <string>

#include "platform/error.h"

namespace g4::media {

ImagePatches patchify(const RgbImage& img, int p) {
  if (p <= 0 || img.width % p != 0 || img.height % p != 0 || img.width == 0 || img.height == 0)
    throw Error("image " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                " cannot be cut into " + std::to_string(p) + "x" + std::to_string(p) + " patches");
  ImagePatches out;
  out.patches_x = img.width / p;
  out.patches_y = img.height / p;
  out.patch_size = p;
  const size_t row = static_cast<size_t>(p) * p * 3;
  out.pixel_values.resize(out.count() * row);
  out.positions.resize(static_cast<size_t>(out.count()) * 2);
  // A division (not a multiply by a rounded 1/255) gives the correctly rounded value, which is
  // what the float64 reference stores; the multiply is one ulp off for some levels.
  for (int py = 0; py < out.patches_y; ++py) {
    for (int px = 0; px < out.patches_x; ++px) {
      const size_t n = static_cast<size_t>(py) * out.patches_x + px;
      float* dst = &out.pixel_values[n * row];
      for (int r = 0; r < p; ++r)
        for (int c = 0; c < p; ++c)
          for (int ch = 0; ch < 3; ++ch) *dst++ = img.pixel(px * p + c, py * p + r)[ch] / 255.0f;
      out.positions[n * 2] = px;
      out.positions[n * 2 + 1] = py;
    }
  }
  return out;
}

}  // namespace g4::media
