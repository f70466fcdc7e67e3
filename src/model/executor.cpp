#include "model/executor.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "ops/ref/reference_ops.h"
#include "ops/rows/activation_kernels.h"
#include "ops/rows/row_reductions.h"
#include "platform/scope_timer.h"
#include "platform/thread_pool.h"

namespace g4::blocks {

namespace {
constexpr size_t kKeptFloats = size_t(1) << 24;
}  // namespace

Scratch::Scratch(Buffer which, size_t n) {
  thread_local std::array<Vec, size_t(Buffer::kCount)> kept;
  buf_ = n <= kKeptFloats ? &kept[size_t(which)] : &fresh_;
  if (buf_->size() < n) buf_->resize(n);
}

void Exec::product(const float* x, int64_t T, const TensorView& w, float* y) const {
  ScopeTimer timer(times ? &times->weight_products_s : nullptr);
  if (matmul) ops::matmul(x, T, w, y, *matmul);
  else ref::matmul(x, T, w, y);
}

Vec Exec::linear(const Vec& x, int64_t T, const TensorView& w) const {
  Vec y(static_cast<size_t>(T * w.shape[0]));
  product(x.data(), T, w, y.data());
  return y;
}

void Exec::products(const float* x, int64_t T, const std::vector<ops::Product>& ps) const {
  ScopeTimer timer(times ? &times->weight_products_s : nullptr);
  if (matmul) ops::matmul_shared_input(x, T, ps, *matmul);
  else
    for (const ops::Product& p : ps) ref::matmul(x, T, *p.w, p.y);
}

void Exec::for_rows(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn) const {
  ThreadPool* pool = matmul ? matmul->pool : nullptr;
  if (!pool || pool->size() == 1 || rows < 2 || rows * width < row_parallel_min_values) {
    fn(0, rows);
    return;
  }
  pool->parallel_for(rows, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

void Exec::rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps) const {
  if (matmul)
    for_rows(rows, n, [&](int64_t b, int64_t e) { ops::rms_norm(x + b * n, e - b, n, w, eps); });
  else
    ref::rms_norm(x, rows, n, w, eps);
}

void Exec::gelu_tanh_mul(float* g, const float* u, size_t n) const {
  if (matmul) {
    ops::gelu_tanh_mul(g, u, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) g[i] = ref::gelu_tanh(g[i]) * u[i];
}

void Exec::softcap(Vec& x, float cap) const {
  if (!matmul) {
    for (float& v : x) v = cap * std::tanh(v / cap);
    return;
  }
  // Element by element, so the pool may split even one row's 262144 logits.
  constexpr int64_t kPiece = 256;  // a multiple of every SIMD width
  const int64_t n = int64_t(x.size()), pieces = (n + kPiece - 1) / kPiece;
  for_rows(pieces, kPiece, [&](int64_t b, int64_t e) {
    const int64_t i0 = b * kPiece, i1 = std::min(n, e * kPiece);
    ops::softcap(x.data() + i0, size_t(i1 - i0), cap);
  });
}

void Exec::add(float* a, const float* b, int64_t rows, int64_t width) const {
  for_rows(rows, width, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0 * width); i < size_t(r1 * width); ++i) a[i] += b[i];
  });
}

void Exec::scale(Vec& a, float s, int64_t width) const {
  for_rows(int64_t(a.size()) / width, width, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0 * width); i < size_t(r1 * width); ++i) a[i] *= s;
  });
}

void Exec::prefetch(int64_t T, const std::vector<const TensorView*>& next) const {
  if (matmul && T == 1) ops::warm_products(next, *matmul);
}

}  // namespace g4::blocks
