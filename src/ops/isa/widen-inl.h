// Values stored as f32, bf16, f16 or int8, widened to f32 in Highway lanes or one at a time:
// shared by the kernels that read a stored type as is (dot_kernels.cpp, kquant_dot_kernels.cpp,
// row_reductions.cpp, attention_kernels.cpp: weights, block scales and K/V rows). Highway per-target include: included once per
// target after <hwy/highway.h>.
#if defined(G4_OPS_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef G4_OPS_WIDEN_INL_H_
#undef G4_OPS_WIDEN_INL_H_
#else
#define G4_OPS_WIDEN_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>  // _cvtsh_ss
#endif

#include "platform/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE float F16Scalar(hwy::float16_t h) {
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return g4::f16_to_f32(bits);
}

// The f16 value (a block's scale) stored at p: F16C on x86 targets that have it (inline), the
// portable routine otherwise.
HWY_INLINE float F16At(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return g4::f16_to_f32(h);
#endif
}

// N values from p (T = float, bf16, f16 or int8) as f32 lanes; exact.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadWidened(D d, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<int8_t, D> d8;
    return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, p)));
  } else {
    const hn::Rebind<T, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, p));
  }
}

// One value as f32; exact.
template <typename T>
HWY_INLINE float ScalarF(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, int8_t>) return float(v);
  else if constexpr (std::is_same_v<T, hwy::bfloat16_t>) return hwy::F32FromBF16(v);
  else return F16Scalar(v);
}

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#endif  // G4_OPS_WIDEN_INL_H_
