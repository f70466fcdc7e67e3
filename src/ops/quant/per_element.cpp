// F32 / F16 / BF16 rows: narrowed from f32 (round to nearest even) and dotted after widening.
#include <algorithm>

#include "ops/quant/block_quant.h"

namespace g4::ops::quant {

float dot_per_element(DType t, const std::byte* b, const float* x, int64_t n) {
  float buf[256];
  float total = 0;
  const size_t es = dtype_size(t);
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = std::min<int64_t>(256, n - i);
    dequantize_row(t, b + size_t(i) * es, buf, m);
    float s = 0;
    for (int64_t j = 0; j < m; ++j) s += buf[j] * x[i + j];
    total += s;
  }
  return total;
}

void quantize_per_element(DType t, const float* x, std::byte* dst, int64_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, x, size_t(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) put_half(dst + i * 2, x[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(dst + i * 2, &h, 2);
      }
      return;
    default: return;
  }
}

}  // namespace g4::ops::quant
