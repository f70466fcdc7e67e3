// The DType dispatch of the per-format quantizers and dots (block_quant.h).
#include "ops/quant/quant_dot.h"

#include <string>

#include "ops/quant/block_quant.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

namespace g4::ops {

float quant_dot(DType t, const std::byte* row, const float* x, int64_t n) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return quant::dot_per_element(t, row, x, n);
    case DType::Q8_0: return quant::dot_q8_0(row, x, n);
    case DType::Q4_0: return quant::dot_q4_0(row, x, n);
    case DType::Q4_1: return quant::dot_q4_1(row, x, n);
    case DType::Q4_K: return quant::dot_q4_k(row, x, n);
    case DType::Q5_K: return quant::dot_q5_k(row, x, n);
    case DType::Q6_K: return quant::dot_q6_k(row, x, n);
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::BF16_R16: break;
  }
  throw Error("quant_dot: " + std::string(dtype_name(t)) + " has no contiguous rows (use dot_row on its view)");
}

float dot_row(const TensorView& w, int64_t r, const float* x) {
  const int64_t cols = w.shape.empty() ? 1 : w.shape.back();
  if (dtype_is_interleaved(w.dtype))  // the reference loops on an interleaved matrix: one row out of its group
    return quant_dot(interleave_base(w.dtype), interleaved_row(w.dtype, w.data, cols, r), x, cols);
  return quant_dot(w.dtype, w.data + uint64_t(r) * row_bytes(w.dtype, cols), x, cols);
}

namespace {
// simd: the Q8_0/Q4_0 quantizers on AVX-512 (x86-64 with DeviceInfo::avx512_usable only).
void quantize_row_with(DType t, const float* x, std::byte* dst, int64_t n, bool simd) {
#if defined(__x86_64__)
  if (simd && t == DType::Q8_0) return quant::quantize_q8_0_avx512(x, dst, n);
  if (simd && t == DType::Q4_0) return quant::quantize_q4_0_avx512(x, dst, n);
#else
  (void)simd;
#endif
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return quant::quantize_per_element(t, x, dst, n);
    case DType::Q8_0: return quant::quantize_q8_0(x, dst, n);
    case DType::Q4_0: return quant::quantize_q4_0(x, dst, n);
    case DType::Q4_1: return quant::quantize_q4_1(x, dst, n);
    case DType::Q4_K: return quant::quantize_q4_k(x, dst, n);
    case DType::Q5_K: return quant::quantize_q5_k(x, dst, n);
    case DType::Q6_K: return quant::quantize_q6_k(x, dst, n);
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::BF16_R16:
      throw Error("quantize_row: " + std::string(dtype_name(t)) +
                  " is a layout of 16 rows, not a row format (quantize to the base format, then interleave_group)");
  }
}
}  // namespace

void quantize_row(DType t, const float* x, std::byte* dst, int64_t n) {
  quantize_row_with(t, x, dst, n, host_cpu().avx512_usable());
}

void quantize_row_scalar(DType t, const float* x, std::byte* dst, int64_t n) { quantize_row_with(t, x, dst, n, false); }

}  // namespace g4::ops
