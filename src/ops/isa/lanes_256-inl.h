// Small helpers shared by the int8 kernels on 256-bit vectors (gemm_q8_256-inl.h,
// gemm_kquant_interleaved_256-inl.h, gemm_kquant_256-inl.h), written once and compiled per tier
// as those files are: G4_Q8_NS, G4_Q8_TARGET and G4_Q8_VNNI are the includer's. Its body enters a
// translation unit once per tier (G4_Q8_VNNI tells the two apart), however many files include it.
#if G4_Q8_VNNI ? !defined(G4_OPS_LANES_256_VNNI_) : !defined(G4_OPS_LANES_256_AVX2_)
#if G4_Q8_VNNI
#define G4_OPS_LANES_256_VNNI_
#else
#define G4_OPS_LANES_256_AVX2_
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/isa/x86_lanes.h"

namespace g4::ops::G4_Q8_NS {

// 32 bytes at any alignment.
G4_Q8_TARGET inline __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 4 activation bytes in every 32-bit lane: the quad each weight quad meets in a VPDPBUSD (or its
// VPMADDUBSW + VPMADDWD pair).
G4_Q8_TARGET inline __m256i broadcast4(const int8_t* p) { return _mm256_set1_epi32(x86::load_i32(p)); }

// The same quad as one VBROADCASTSS from memory. In the Q4_0/Q8_0 prefill panel (gemm_q8_256-inl.h)
// GCC 12 turned broadcast4 into a VPBROADCASTD into a register, stored it on the stack and fed
// VPMADDUBSW from there (0.265 against 0.239 ms a product); in the K-quant kernels this form cost
// half as many instructions again (callgrind), so each kernel takes the one that compiles well.
G4_Q8_TARGET inline __m256i broadcast4_load(const int8_t* p) {
  return _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(p)));
}

// v, unchanged, as the end of its chain of adds (an empty asm GCC cannot see through): GCC
// re-associated chains of VPADDD into trees that held every VPMADDWD result at once and spilled
// them (the Q6_K decode and the Q8 few-token sums); behind this each sum takes its products in
// order, in its one register. Integer adds: the same sum either way.
G4_Q8_TARGET inline __m256i in_order(__m256i v) {
  asm("" : "+x"(v));
  return v;
}

// int16 lanes summed in pairs into int32 lanes, exactly: VPMADDUBSW's pair sums widened.
G4_Q8_TARGET inline __m256i pair_sums(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

// The f16 at p (any alignment) in f32.
G4_Q8_TARGET inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// The 8 f16 at p (any alignment) in f32, one per lane.
G4_Q8_TARGET inline __m256 halves8_at(const std::byte* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The 8 lanes' sum in one fixed order, (f0 + f2) + (f1 + f3) for f = v[0-3] + v[4-7]: that of
// x86::lane_sum's last three steps and gemm_kquant.cpp's lane_sum8, so that outputs keep the bits
// of the AVX-512 kernels.
G4_Q8_TARGET inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace g4::ops::G4_Q8_NS

#endif
