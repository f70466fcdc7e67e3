// Highway multi-target compilation: this file is re-included once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/rows/activation_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>

#include "ops/rows/activation_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
template <class D, class V>
HWY_INLINE V GeluTanh(D d, V x) {
  const auto k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f), half = hn::Set(d, 0.5f);
  const auto inner = hn::Mul(k, hn::MulAdd(hn::Mul(c, x), hn::Mul(x, x), x));
  return hn::Mul(hn::Mul(half, x), hn::Add(hn::Set(d, 1.0f), hn::Tanh(d, inner)));
}

void GeluTanhMul(float* g, const float* u, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto v = GeluTanh(d, hn::LoadU(d, g + i));
    if (u) v = hn::Mul(v, hn::LoadU(d, u + i));
    hn::StoreU(v, d, g + i);
  }
  if (i < n) {  // same arithmetic on a padded tail
    HWY_ALIGN float gt[hn::MaxLanes(d)] = {}, ut[hn::MaxLanes(d)] = {};
    for (size_t j = i; j < n; ++j) {
      gt[j - i] = g[j];
      ut[j - i] = u ? u[j] : 1.0f;
    }
    hn::Store(hn::Mul(GeluTanh(d, hn::Load(d, gt)), hn::Load(d, ut)), d, gt);
    for (size_t j = i; j < n; ++j) g[j] = gt[j - i];
  }
}

void Softcap(float* x, size_t n, float cap) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vc = hn::Set(d, cap), inv = hn::Set(d, 1.0f / cap);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(vc, hn::Tanh(d, hn::Mul(hn::LoadU(d, x + i), inv))), d, x + i);
  if (i < n) {
    HWY_ALIGN float t[hn::MaxLanes(d)] = {};
    for (size_t j = i; j < n; ++j) t[j - i] = x[j];
    hn::Store(hn::Mul(vc, hn::Tanh(d, hn::Mul(hn::Load(d, t), inv))), d, t);
    for (size_t j = i; j < n; ++j) x[j] = t[j - i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace g4::ops {
HWY_EXPORT(GeluTanhMul);
HWY_EXPORT(Softcap);

void gelu_tanh_mul(float* g, const float* u, size_t n) { HWY_DYNAMIC_DISPATCH(GeluTanhMul)(g, u, n); }
void softcap(float* x, size_t n, float cap) { HWY_DYNAMIC_DISPATCH(Softcap)(x, n, cap); }
}  // namespace g4::ops
#endif
