#include "media/image_target_size.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "media/image_token_budget.h"
#include "platform/error.h"

namespace g4::media {

ImageSize image_target_size(int h0, int w0, int budget, const PatchGeometry& g) {
  check_image_token_budget(budget);
  const std::string src = std::to_string(w0) + "x" + std::to_string(h0);
  if (h0 <= 0 || w0 <= 0) throw Error("image " + src + " is empty");
  // Python float64 arithmetic, term for term, so the floors land where transformers' do.
  const double max_patches = double(budget) * g.pooling_kernel * g.pooling_kernel;
  const double target_px = max_patches * g.patch_size * g.patch_size;
  const double factor = std::sqrt(target_px / (double(h0) * double(w0)));
  const double side = double(g.patch_size) * g.pooling_kernel;
  double th = std::floor(factor * h0 / side) * side;
  double tw = std::floor(factor * w0 / side) * side;
  if (th == 0 && tw == 0) throw Error("image " + src + " cannot be resized to fit the token budget");
  const double max_side = double(budget) * side;  // max_patches // k^2 * side
  if (th == 0) {
    th = side;
    tw = std::min(std::floor(double(w0) / h0) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(std::floor(double(h0) / w0) * side, max_side);
  }
  if (th * tw > target_px)
    throw Error("image " + src + " has too extreme an aspect ratio for a budget of " + std::to_string(budget) + " tokens");
  return ImageSize{static_cast<int>(th), static_cast<int>(tw)};
}

int image_soft_tokens(ImageSize s, const PatchGeometry& g) {
  const int per_token = g.patch_size * g.pooling_kernel;
  return (s.height / per_token) * (s.width / per_token);
}

}  // namespace g4::media
