// gemm_kquant_interleaved_rows_256 (gemm_q8_avx2.h): the Q4_K_R16, Q5_K_R16 and Q6_K_R16 kernels of
// gemm_kquant_interleaved_256-inl.h, compiled once for AVX2 and once for AVX-VNNI, and the walk of
// a product's 16-row groups over them.
#include <string>

#include "ops/matmul/gemm_kquant.h"
#include "ops/matmul/gemm_q8_avx2.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"

namespace g4::ops {
namespace {

constexpr int64_t kSuperBlock = q4_k::kBlockValues;  // Q4_K, Q5_K and Q6_K alike

// One tier's kernels (gemm_kquant_interleaved_256-inl.h) as function pointers, so the walk below is
// written once.
struct KQuantR16Kernels256 {
  using Decode = void (*)(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, float* y);
  // The groups from w x the panel of tokens from t, `count` of them real.
  using Prefill = void (*)(const std::byte* w, uint64_t group_bytes, const Q8Activations& a, int64_t t, float* y,
                           int64_t ldy, int count);
  Decode decode[3][3];    // [1, 2 or 4 groups side by side][Q4_K, Q5_K, Q6_K]
  Prefill prefill[2][3];  // [1 or 2 groups][Q4_K, Q5_K, Q6_K]
};

}  // namespace
}  // namespace g4::ops

#define G4_INT8_256_KERNELS "ops/matmul/gemm_kquant_interleaved_256-inl.h"
#include "ops/isa/foreach_int8_tier_256.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

// gemm_kquant_interleaved_rows' walk over one tier's kernels.
void interleaved_rows_on(const KQuantR16Kernels256& k, const Q8Activations& a, const std::byte* w, DType dtype,
                         int64_t o_begin, int64_t o_end, float* y, int64_t ldy, const DecodeStreaming& decode) {
  const int kind = dtype == DType::Q6_K_R16 ? 2 : dtype == DType::Q5_K_R16 ? 1 : 0;
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(interleave_base(dtype), a.in);
  // Decode: the streams side by side that ops::plan_decode_streaming chose; its prefetch distance
  // is not used, these kernels prefetch kquant_decode_prefetch_bytes ahead (as on AVX-512).
  walk_interleaved_groups(
      a.T, o_begin / kInterleaveRows, o_end / kInterleaveRows, decode_groups_for(decode, group_bytes),
      [&](int n, int64_t g) {
        k.decode[n == 4 ? 2 : n == 2 ? 1 : 0][kind](w + uint64_t(g) * group_bytes, group_bytes, a,
                                                     y + g * kInterleaveRows);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        k.prefill[pair ? 1 : 0][kind](w + uint64_t(g) * group_bytes, group_bytes, a, t,
                                      y + t * ldy + g * kInterleaveRows, ldy, count);
      });
}

// The two tiers' tables, built at compile time.
constexpr KQuantR16Kernels256 kAvx2 = avx2::kernels(), kAvxVnni = avx_vnni::kernels();

}  // namespace

void gemm_kquant_interleaved_rows_256(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                                      int64_t o_end, float* y, int64_t ldy, DecodeStreaming decode, Int8Dot tier) {
  check_kquant_interleaved_args(a, dtype, o_begin, o_end);
  if (tier == Int8Dot::Avx2) interleaved_rows_on(kAvx2, a, w, dtype, o_begin, o_end, y, ldy, decode);
  else if (tier == Int8Dot::AvxVnni) interleaved_rows_on(kAvxVnni, a, w, dtype, o_begin, o_end, y, ldy, decode);
  else
    throw Error("gemm_kquant_interleaved_rows_256: " + std::string(int8_dot_name(tier)) +
                " is not a 256-bit int8 tier (avx2, avx-vnni)");
}

#else  // not x86-64: never reached (int8_kernel_tier() is None)

void gemm_kquant_interleaved_rows_256(const Q8Activations&, const std::byte*, DType, int64_t, int64_t, float*, int64_t,
                                      DecodeStreaming, Int8Dot) {}

#endif

}  // namespace g4::ops
