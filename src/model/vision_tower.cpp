#include "model/vision_tower.h"

#include <cmath>
#include <string>

#include "model/vision_encoder_layer.h"
#include "platform/error.h"

namespace g4 {

using blocks::Vec;

namespace {

// x [N, Hv] = (2·(px − 0.5)) · input_projᵀ + table[0][x] + table[1][y]
Vec embed_patches(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, const blocks::Exec& ex) {
  const int64_t Hv = c.hidden_size, W = c.patch_width(), N = int64_t(in.positions.size()) / 2;
  const int64_t P = c.position_embedding_size;
  Vec px(in.pixel_values.begin(), in.pixel_values.end());  // [N, 3p²]
  ex.for_rows(N, W, [&](int64_t b, int64_t e) {
    for (int64_t i = b * W; i < e * W; ++i) px[size_t(i)] = 2.0f * (px[size_t(i)] - 0.5f);  // [0, 1] -> [-1, 1]
  });
  Vec x(size_t(N * Hv));
  ex.product(px.data(), N, *w.input_proj, x.data());
  // The factorized table viewed as [2·P, Hv]: row x of the first block, row P + y of the second.
  ex.for_rows(N, Hv, [&](int64_t b, int64_t e) {
    Vec row(static_cast<size_t>(Hv));
    for (int64_t t = b; t < e; ++t) {
      float* xt = &x[size_t(t * Hv)];
      w.position_table->row_to_f32(in.positions[size_t(2 * t)], row.data());
      for (int64_t i = 0; i < Hv; ++i) xt[i] += row[size_t(i)];
      w.position_table->row_to_f32(P + in.positions[size_t(2 * t + 1)], row.data());
      for (int64_t i = 0; i < Hv; ++i) xt[i] += row[size_t(i)];
    }
  });
  return x;
}

// y [S, Hv] = k x k average of x over the patch grid, pooled cells in raster order, times √Hv.
Vec pool_patches(const VisionConfig& c, const VisionInput& in, const Vec& x) {
  const int64_t Hv = c.hidden_size, k = c.pooling_kernel_size, N = int64_t(in.positions.size()) / 2;
  const int64_t pooled_cols = in.grid_cols / k, S = N / (k * k);
  Vec y(size_t(S * Hv), 0.0f);
  for (int64_t t = 0; t < N; ++t) {
    const int64_t j = in.positions[size_t(2 * t)] / k + pooled_cols * (in.positions[size_t(2 * t + 1)] / k);
    for (int64_t i = 0; i < Hv; ++i) y[size_t(j * Hv + i)] += x[size_t(t * Hv + i)];
  }
  // The weights are 1/k² each, then the scalar √Hv (in f32, as the newer transformers keeps it).
  const float inv = 1.0f / float(k * k), scale = std::sqrt(float(Hv));
  for (float& v : y) v = (v * inv) * scale;
  return y;
}

// y = (y − std_bias) · std_scale, per channel.
void apply_standardization(const VisionWeights& w, int64_t Hv, Vec& y) {
  Vec bias(static_cast<size_t>(Hv)), scale(static_cast<size_t>(Hv));
  w.std_bias->row_to_f32(0, bias.data());
  w.std_scale->row_to_f32(0, scale.data());
  for (size_t t = 0; t < y.size(); ++t) y[t] = (y[t] - bias[t % size_t(Hv)]) * scale[t % size_t(Hv)];
}

[[noreturn]] void bad_input(const std::string& why) { throw Error("vision tower input: " + why); }

}  // namespace

int64_t vision_soft_tokens(const VisionConfig& c, const VisionInput& in) {
  const int64_t k = c.pooling_kernel_size;
  return (int64_t(in.grid_rows) / k) * (int64_t(in.grid_cols) / k);
}

void check_vision_input(const VisionConfig& c, const VisionInput& in) {
  const int64_t k = c.pooling_kernel_size, rows = in.grid_rows, cols = in.grid_cols, N = rows * cols;
  if (rows < 1 || cols < 1) bad_input("empty patch grid " + std::to_string(rows) + "x" + std::to_string(cols));
  if (rows % k || cols % k)
    bad_input("patch grid " + std::to_string(rows) + "x" + std::to_string(cols) +
              " is not a multiple of the pooling kernel " + std::to_string(k) + " on both sides");
  if (rows > c.position_embedding_size || cols > c.position_embedding_size)
    bad_input("patch grid " + std::to_string(rows) + "x" + std::to_string(cols) + " exceeds the position table (" +
              std::to_string(c.position_embedding_size) + " per side)");
  if (int64_t(in.pixel_values.size()) != N * c.patch_width())
    bad_input(std::to_string(in.pixel_values.size()) + " pixel values, expected " + std::to_string(N) + " patches x " +
              std::to_string(c.patch_width()));
  if (int64_t(in.positions.size()) != 2 * N)
    bad_input(std::to_string(in.positions.size() / 2) + " positions, expected " + std::to_string(N));
  std::vector<bool> seen(size_t(N), false);
  for (int64_t t = 0; t < N; ++t) {
    const int32_t x = in.positions[size_t(2 * t)], y = in.positions[size_t(2 * t + 1)];
    if (x < 0 || x >= cols || y < 0 || y >= rows)
      bad_input("patch " + std::to_string(t) + " at (" + std::to_string(x) + ", " + std::to_string(y) +
                ") is outside the " + std::to_string(rows) + "x" + std::to_string(cols) + " grid");
    if (seen[size_t(y * cols + x)])
      bad_input("patch " + std::to_string(t) + " repeats position (" + std::to_string(x) + ", " + std::to_string(y) + ")");
    seen[size_t(y * cols + x)] = true;
  }
}

Vec vision_tower(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, const blocks::Exec& ex,
                 VisionTrace* trace) {
  check_vision_input(c, in);
  Vec x = embed_patches(c, w, in, ex);  // [N, Hv]
  if (trace) trace->patch_embeds = x;
  const VisionRope rope(c, in.positions);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    vision_encoder_layer(c, w.layers[l], rope, x, ex);
    if (trace && l == 0) trace->layer0_out = x;
  }
  if (trace) trace->encoder_out = x;
  Vec y = pool_patches(c, in, x);  // [S, Hv]
  if (c.standardize) apply_standardization(w, c.hidden_size, y);
  if (trace) trace->pooled = y;
  return y;
}

}  // namespace g4
