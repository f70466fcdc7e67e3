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

// One pass along x: in [rows, w_in, 3] -> out [rows, taps.size(), 3], unrounded.
template <class Out, class T>
std::vector<Out> resample_x(const T* in, int rows, int w_in, const std::vector<Taps>& taps) {
  const size_t w_out = taps.size();
  std::vector<Out> out(rows * w_out * 3);
  for (int y = 0; y < rows; ++y) {
    const T* row = in + static_cast<size_t>(y) * w_in * 3;
    for (size_t x = 0; x < w_out; ++x) {
      double acc[3] = {0, 0, 0};
      const Taps& t = taps[x];
      for (size_t k = 0; k < t.weights.size(); ++k)
        for (int ch = 0; ch < 3; ++ch) acc[ch] += t.weights[k] * row[(t.first + k) * 3 + ch];
      for (int ch = 0; ch < 3; ++ch) out[(y * w_out + x) * 3 + ch] = static_cast<Out>(acc[ch]);
    }
  }
  return out;
}

// One pass along y: in [h_in, cols, 3] -> out [taps.size(), cols, 3], unrounded.
template <class Out, class T>
std::vector<Out> resample_y(const T* in, int cols, const std::vector<Taps>& taps) {
  const size_t row = static_cast<size_t>(cols) * 3;
  std::vector<Out> out(taps.size() * row);
  for (size_t y = 0; y < taps.size(); ++y) {
    const Taps& t = taps[y];
    for (size_t i = 0; i < row; ++i) {
      double acc = 0;
      for (size_t k = 0; k < t.weights.size(); ++k) acc += t.weights[k] * in[(t.first + k) * row + i];
      out[y * row + i] = static_cast<Out>(acc);
    }
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic_antialias(const RgbImage& in, ImageSize out) {
  const int h0 = in.height, w0 = in.width, h = out.height, w = out.width;
  const std::vector<Taps> tx = axis_taps(w0, w), ty = axis_taps(h0, h);
  // The passes commute (no rounding between them), so the one that makes the smaller
  // intermediate goes first: a strip 100000 high and 10 wide, resized to 13440 x 48, would
  // otherwise hold 100000 x 48 x 3 floats instead of 13440 x 10 x 3. The
  // intermediate is float (torchvision's precision), the final sums double until rounded.
  const bool x_first = size_t(h0) * w <= size_t(h) * w0;
  const std::vector<double> res =
      x_first ? resample_y<double>(resample_x<float>(in.rgb.data(), h0, w0, tx).data(), w, ty)
              : resample_x<double>(resample_y<float>(in.rgb.data(), w0, ty).data(), h, w0, tx);
  // Rounded to the nearest level (ties to even, as numpy's rint in the reference) and clamped
  // (the cubic overshoots at edges).
  RgbImage img{w, h, std::vector<uint8_t>(res.size())};
  for (size_t i = 0; i < res.size(); ++i)
    img.rgb[i] = static_cast<uint8_t>(std::nearbyint(std::clamp(res[i], 0.0, 255.0)));
  return img;
}

}  // namespace g4::media
