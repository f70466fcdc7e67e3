#include "ops/ref/reference_ops.h"

#include <algorithm>
#include <cmath>

#include "ops/quant/quant_dot.h"
#include "platform/row_interleave.h"

namespace g4::ref {

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void matmul(const float* x, int64_t T, const TensorView& w, float* y) {
  const int64_t out = w.shape[0], in = w.shape[1];
  // Block types: dot straight from the packed blocks. BF16_R16 is a block type only in layout: its
  // rows are widened and summed as BF16 rows are, so interleaving changes no reference bit.
  if (dtype_is_quantized(interleave_base(w.dtype))) {
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < T; ++t) y[t * out + o] = ops::dot_row(w, o, x + t * in);
    return;
  }
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    const float* wr;
    if (w.dtype == DType::F32) {
      wr = reinterpret_cast<const float*>(w.data) + o * in;
    } else {
      w.row_to_f32(o, row.data());
      wr = row.data();
    }
    for (int64_t t = 0; t < T; ++t) y[t * out + o] = dot(x + t * in, wr, in);
  }
}

void rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps) {
  std::vector<float> wf;
  if (w) {
    wf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) wf[size_t(i)] = w->at(i);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    const float ms = dot(v, v, n) / float(n);
    const float inv = 1.0f / std::sqrt(ms + eps);
    if (w)
      for (int64_t i = 0; i < n; ++i) v[i] = (v[i] * inv) * wf[size_t(i)];
    else
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv;
  }
}

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

void softmax(float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void rope_cos_sin(const std::vector<float>& inv_freq, int64_t pos, float* cos, float* sin) {
  for (size_t k = 0; k < inv_freq.size(); ++k) {
    // The reference forms freqs = inv_freq * pos in f32, then cos/sin of that.
    const float angle = float(pos) * inv_freq[k];
    cos[k] = std::cos(angle);
    sin[k] = std::sin(angle);
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t hd, const float* cos, const float* sin) {
  const int64_t half = hd / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* lo = x + h * hd;
    float* hi = lo + half;
    for (int64_t k = 0; k < half; ++k) {
      const float a = lo[k], b = hi[k];
      lo[k] = a * cos[k] - b * sin[k];
      hi[k] = b * cos[k] + a * sin[k];
    }
  }
}

void rope(float* x, int64_t n_heads, int64_t hd, const std::vector<float>& inv_freq, int64_t pos) {
  std::vector<float> cos(inv_freq.size()), sin(inv_freq.size());
  rope_cos_sin(inv_freq, pos, cos.data(), sin.data());
  rope_rotate(x, n_heads, hd, cos.data(), sin.data());
}

std::vector<float> rope_inv_freq_default(int64_t hd, double theta) {
  std::vector<float> f(static_cast<size_t>(hd / 2));
  for (int64_t k = 0; k < hd / 2; ++k) f[size_t(k)] = float(1.0 / std::pow(theta, double(2 * k) / double(hd)));
  return f;
}

std::vector<float> rope_inv_freq_proportional(int64_t hd, double theta, double partial_rotary_factor) {
  const int64_t rotated = int64_t(partial_rotary_factor * double(hd)) / 2;  // int(0.25·512 // 2) = 64
  std::vector<float> f(size_t(hd / 2), 0.0f);
  for (int64_t k = 0; k < rotated; ++k) f[size_t(k)] = float(1.0 / std::pow(theta, double(2 * k) / double(hd)));
  return f;
}

void attend_row(const float* q, const float* k, const float* v, int64_t n, int64_t nH, int64_t kvh, int64_t hd, float* out) {
  std::vector<float> scores(static_cast<size_t>(n));
  const int64_t group = nH / kvh;
  for (int64_t h = 0; h < nH; ++h) {
    const int64_t kh = h / group;  // GQA: query head h reads kv head h / (nH / kvh)
    const float* qv = q + h * hd;
    for (int64_t s = 0; s < n; ++s) scores[size_t(s)] = ref::dot(qv, k + (s * kvh + kh) * hd, hd);  // scaling 1.0
    ref::softmax(scores.data(), n);
    float* o = out + h * hd;
    std::fill(o, o + hd, 0.0f);
    for (int64_t s = 0; s < n; ++s) {
      const float pr = scores[size_t(s)];
      const float* vv = v + (s * kvh + kh) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] += pr * vv[d];
    }
  }
}

}  // namespace g4::ref
