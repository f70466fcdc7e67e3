// Highway multi-target compilation: this file is re-included once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/rows/row_reductions.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/rows/row_reductions.h"
#include "ops/isa/widen-inl.h"
#include "platform/dtype.h"
#include "platform/error.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The weight row is read in its stored type (f32, or bf16 widened in the lanes: exact), so a
// bf16 checkpoint's norm weights need no conversion pass per call (~290 K values per E2B token).
template <class W>
void RmsNormRowsOf(float* x, int64_t rows, int64_t n, const W* w, float eps) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    auto a0 = hn::Zero(d), a1 = hn::Zero(d);
    int64_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto p = hn::LoadU(d, v + i), q = hn::LoadU(d, v + i + N);
      a0 = hn::MulAdd(p, p, a0);
      a1 = hn::MulAdd(q, q, a1);
    }
    float ss = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
    for (; i < n; ++i) ss += v[i] * v[i];
    const float inv = 1.0f / std::sqrt(ss / float(n) + eps);
    const auto vinv = hn::Set(d, inv);
    i = 0;
    for (; i + N <= n; i += N) {
      auto y = hn::Mul(hn::LoadU(d, v + i), vinv);
      if (w) y = hn::Mul(y, LoadWidened(d, w + i));
      hn::StoreU(y, d, v + i);
    }
    for (; i < n; ++i) v[i] = w ? (v[i] * inv) * ScalarF(w[i]) : v[i] * inv;
  }
}

void RmsNormRows(float* x, int64_t rows, int64_t n, const float* w, float eps) { RmsNormRowsOf(x, rows, n, w, eps); }
void RmsNormRowsBf16(float* x, int64_t rows, int64_t n, const hwy::bfloat16_t* w, float eps) {
  RmsNormRowsOf(x, rows, n, w, eps);
}

int64_t ArgMax(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const float kNegInf = -std::numeric_limits<float>::infinity();
  // Pass 1: the maximum, NaN read as -inf (a NaN lane is replaced before Max sees it).
  auto vm = hn::Set(d, kNegInf);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(d, x + i);
    vm = hn::Max(vm, hn::IfThenElse(hn::Eq(v, v), v, hn::Set(d, kNegInf)));
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, vm));
  for (; i < n; ++i)
    if (x[i] > m) m = x[i];
  if (!(m > kNegInf)) return 0;
  // Pass 2: the first element equal to it.
  const auto target = hn::Set(d, m);
  for (i = 0; i + N <= n; i += N) {
    const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), target));
    if (k >= 0) return i + k;
  }
  for (; i < n; ++i)
    if (x[i] == m) return i;
  return 0;  // unreachable: m came from x
}

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace g4::ops {
HWY_EXPORT(RmsNormRows);
HWY_EXPORT(RmsNormRowsBf16);
HWY_EXPORT(ArgMax);

void rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps) {
  const float* wf = nullptr;
  thread_local std::vector<float> converted;
  if (w) {
    if (w->shape.size() != 1 || w->shape[0] != n)
      throw Error("rms_norm: weight '" + w->name + "' has shape " + shape_str(w->shape) + ", expected [" +
                  std::to_string(n) + "]");
    if (w->dtype == DType::F32) {
      wf = reinterpret_cast<const float*>(w->data);
    } else if (w->dtype == DType::BF16) {  // read as stored, widened in the lanes
      HWY_DYNAMIC_DISPATCH(RmsNormRowsBf16)(x, rows, n, reinterpret_cast<const hwy::bfloat16_t*>(w->data), eps);
      return;
    } else {  // any other stored dtype, decoded the way every weight row is
      converted.resize(size_t(n));
      w->row_to_f32(0, converted.data());
      wf = converted.data();
    }
  }
  HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, rows, n, wf, eps);
}

int64_t argmax(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(ArgMax)(x, n); }
}  // namespace g4::ops
#endif
