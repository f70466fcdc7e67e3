// Q5_K (platform/block_formats.h): Q4_K with a fifth bit per value; x = d·sc_j·q − dmin·m_j, q in
// 0..31. The super-block fit is Q4_K's (q4_k.cpp).
#include "ops/quant/block_quant.h"
#include "ops/quant/kquant_dot-inl.h"

namespace g4::ops::quant {

using namespace q5_k;

float dot_q5_k(const std::byte* b, const float* x, int64_t n) { return dot_k_quant<true>(b, x, n); }

void quantize_q5_k(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / kBlockValues; ++k)
    quantize_k_super_block(x + k * kBlockValues, b + k * kBlockBytes, 31, true);
}

}  // namespace g4::ops::quant
