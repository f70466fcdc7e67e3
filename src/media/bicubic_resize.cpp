#include "media/bicubic_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace g4::media {

namespace {

double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// The taps of one output pixel along one axis: source indices first..first+weights.size()-1.
struct Taps {
  int first = 0;
  std::vector<double> weights;
};

// Pillow's precompute_coeffs (which torchvision's antialiased kernels copy), in double.
std::vector<Taps> axis_taps(int in_size, int out_size) {
  const double scale = double(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 2.0 * filter_scale;  // bicubic support 2, stretched when shrinking
  std::vector<Taps> taps(out_size);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    Taps& t = taps[i];
    t.first = lo;
    double total = 0;
    for (int x = lo; x < hi; ++x) {
      t.weights.push_back(keys_cubic((x - center + 0.5) / filter_scale));
      total += t.weights.back();
    }
    if (total != 0)
      for (double& w : t.weights) w /= total;
  }
  return taps;
}

}  // namespace

RgbImage resize_bicubic_antialias(const RgbImage& in, ImageSize out) {
  const int h0 = in.height, w0 = in.width, h = out.height, w = out.width;
  const std::vector<Taps> tx = axis_taps(w0, w), ty = axis_taps(h0, h);

  // Horizontal pass: [h0, w0, 3] -> mid [h0, w, 3], unrounded.
  std::vector<float> mid(static_cast<size_t>(h0) * w * 3);
  for (int y = 0; y < h0; ++y) {
    for (int x = 0; x < w; ++x) {
      double acc[3] = {0, 0, 0};
      const Taps& t = tx[x];
      for (size_t k = 0; k < t.weights.size(); ++k) {
        const uint8_t* p = in.pixel(t.first + static_cast<int>(k), y);
        for (int ch = 0; ch < 3; ++ch) acc[ch] += t.weights[k] * p[ch];
      }
      for (int ch = 0; ch < 3; ++ch) mid[(static_cast<size_t>(y) * w + x) * 3 + ch] = static_cast<float>(acc[ch]);
    }
  }

  // Vertical pass: mid -> [h, w, 3], rounded to the nearest level (ties to even) and clamped.
  RgbImage res{w, h, std::vector<uint8_t>(static_cast<size_t>(h) * w * 3)};
  for (int y = 0; y < h; ++y) {
    const Taps& t = ty[y];
    for (size_t i = 0; i < static_cast<size_t>(w) * 3; ++i) {
      double acc = 0;
      for (size_t k = 0; k < t.weights.size(); ++k) acc += t.weights[k] * mid[(t.first + k) * w * 3 + i];
      res.rgb[static_cast<size_t>(y) * w * 3 + i] = static_cast<uint8_t>(std::nearbyint(std::clamp(acc, 0.0, 255.0)));
    }
  }
  return res;
}

}  // namespace g4::media
