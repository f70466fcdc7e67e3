#include "platform/isa_selftest.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "platform/amx_tile_config.h"
#include "platform/dtype.h"
#include "platform/sigill_guard.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"
#endif

namespace g4 {
namespace {

constexpr int kRows = 16;  // M = N = 16: one full AMX tile of 32-bit results
constexpr int kBf16Depth = 32;  // K: one 64-byte tile row of bf16
constexpr int kInt8Depth = 64;  // K: one 64-byte tile row of int8

// Small integers: every product and every sum is exact in bf16/f32/int32, so results must match
// the scalar path exactly; any difference is a broken unit, not rounding.
int a_value(int m, int k) { return (m * 7 + k * 3) % 9 - 4; }
int b_value(int k, int n) { return (k * 5 + n * 11) % 7 - 3; }

[[maybe_unused]] std::string mismatch(int m, int n, double got, double want) {
  return "C[" + std::to_string(m) + "][" + std::to_string(n) + "] = " + std::to_string(got) +
         ", scalar path gives " + std::to_string(want);
}

SelfTest refused(const char* unit) {
  return {SelfTestOutcome::Failed,
          std::string("SIGILL: this CPU or OS refused the ") + unit + " instruction"};
}

#if defined(__x86_64__)
// tmm0 = C [16 x 16 x 4 bytes], tmm1 = A [16 x 64 bytes], tmm2 = B [16 x 64 bytes] (packed pairs/quads).
TileConfig three_full_tiles() {
  TileConfig config;
  for (int t = 0; t < 3; ++t) config.set(t, kTileRows, kTileRowBytes);
  return config;
}

G4_TARGET_AMX_BF16 void amx_bf16_product(const TileConfig* config, const uint16_t* a, const uint16_t* b_pairs,
                                         float* c) {
  _tile_loadconfig(config);
  _tile_loadd(0, c, 64);
  _tile_loadd(1, a, 64);
  _tile_loadd(2, b_pairs, 64);
  _tile_dpbf16ps(0, 1, 2);
  _tile_stored(0, c, 64);
  _tile_release();
}

G4_TARGET_AMX_INT8 void amx_int8_product(const TileConfig* config, const int8_t* a, const int8_t* b_quads, int32_t* c) {
  _tile_loadconfig(config);
  _tile_loadd(0, c, 64);
  _tile_loadd(1, a, 64);
  _tile_loadd(2, b_quads, 64);
  _tile_dpbssd(0, 1, 2);
  _tile_stored(0, c, 64);
  _tile_release();
}

G4_TARGET_AVX512F_BF16 void avx512_bf16_dot(const uint16_t* a, const uint16_t* b, float* c) {
  __m512 acc = _mm512_loadu_ps(c);
  __m512i va = _mm512_loadu_si512(a);
  __m512i vb = _mm512_loadu_si512(b);
  acc = _mm512_dpbf16_ps(acc, (__m512bh)va, (__m512bh)vb);
  _mm512_storeu_ps(c, acc);
}

G4_TARGET_AVX512F_VNNI void avx512_vnni_dot(const uint8_t* a, const int8_t* b, int32_t* c) {
  __m512i acc = _mm512_loadu_si512(c);
  acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(a), _mm512_loadu_si512(b));
  _mm512_storeu_si512(c, acc);
}

G4_TARGET_AVX2_AVXVNNI void avx_vnni_dot(const uint8_t* a, const int8_t* b, int32_t* c) {
  __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  acc = _mm256_dpbusd_avx_epi32(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), acc);
}
#endif

}  // namespace

SelfTest check_amx_bf16_tile_product() {
#if defined(__x86_64__)
  alignas(64) uint16_t a[kRows][kBf16Depth];
  alignas(64) uint16_t b_pairs[kBf16Depth / 2][kRows][2];  // VNNI layout
  alignas(64) float c[kRows][kRows];
  for (int m = 0; m < kRows; ++m)
    for (int k = 0; k < kBf16Depth; ++k) a[m][k] = f32_to_bf16(float(a_value(m, k)));
  for (int k = 0; k < kBf16Depth; ++k)
    for (int n = 0; n < kRows; ++n) b_pairs[k / 2][n][k % 2] = f32_to_bf16(float(b_value(k, n)));
  std::memset(c, 0, sizeof c);
  const TileConfig config = three_full_tiles();
  if (!run_catching_sigill([&] { amx_bf16_product(&config, &a[0][0], &b_pairs[0][0][0], &c[0][0]); }))
    return refused("AMX-BF16 tile");
  for (int m = 0; m < kRows; ++m)
    for (int n = 0; n < kRows; ++n) {
      float want = 0;
      for (int k = 0; k < kBf16Depth; ++k) want += float(a_value(m, k) * b_value(k, n));
      if (c[m][n] != want) return {SelfTestOutcome::Failed, "AMX-BF16 tile product: " + mismatch(m, n, c[m][n], want)};
    }
  return {SelfTestOutcome::Passed, "16x16x32 bf16 tile product matches the scalar path"};
#else
  return {SelfTestOutcome::NotRun, "not an x86-64 build"};
#endif
}

SelfTest check_amx_int8_tile_product() {
#if defined(__x86_64__)
  alignas(64) int8_t a[kRows][kInt8Depth];
  alignas(64) int8_t b_quads[kInt8Depth / 4][kRows][4];  // VNNI layout
  alignas(64) int32_t c[kRows][kRows];
  for (int m = 0; m < kRows; ++m)
    for (int k = 0; k < kInt8Depth; ++k) a[m][k] = int8_t(a_value(m, k));
  for (int k = 0; k < kInt8Depth; ++k)
    for (int n = 0; n < kRows; ++n) b_quads[k / 4][n][k % 4] = int8_t(b_value(k, n));
  std::memset(c, 0, sizeof c);
  const TileConfig config = three_full_tiles();
  if (!run_catching_sigill([&] { amx_int8_product(&config, &a[0][0], &b_quads[0][0][0], &c[0][0]); }))
    return refused("AMX-INT8 tile");
  for (int m = 0; m < kRows; ++m)
    for (int n = 0; n < kRows; ++n) {
      int32_t want = 0;
      for (int k = 0; k < kInt8Depth; ++k) want += a_value(m, k) * b_value(k, n);
      if (c[m][n] != want) return {SelfTestOutcome::Failed, "AMX-INT8 tile product: " + mismatch(m, n, c[m][n], want)};
    }
  return {SelfTestOutcome::Passed, "16x16x64 int8 tile product matches the scalar path"};
#else
  return {SelfTestOutcome::NotRun, "not an x86-64 build"};
#endif
}

SelfTest check_avx512_bf16_dot() {
#if defined(__x86_64__)
  constexpr int kLanes = 16;
  alignas(64) uint16_t a[2 * kLanes];
  alignas(64) uint16_t b[2 * kLanes];
  alignas(64) float c[kLanes] = {};
  for (int i = 0; i < 2 * kLanes; ++i) {
    a[i] = f32_to_bf16(float(a_value(i / 2, i)));
    b[i] = f32_to_bf16(float(b_value(i, i / 2)));
  }
  if (!run_catching_sigill([&] { avx512_bf16_dot(a, b, c); })) return refused("AVX512_BF16 VDPBF16PS");
  for (int lane = 0; lane < kLanes; ++lane) {
    float want = bf16_to_f32(a[2 * lane]) * bf16_to_f32(b[2 * lane]) +
                 bf16_to_f32(a[2 * lane + 1]) * bf16_to_f32(b[2 * lane + 1]);
    if (c[lane] != want) return {SelfTestOutcome::Failed, "VDPBF16PS: " + mismatch(0, lane, c[lane], want)};
  }
  return {SelfTestOutcome::Passed, "16-lane bf16 pair dot product matches the scalar path"};
#else
  return {SelfTestOutcome::NotRun, "not an x86-64 build"};
#endif
}

namespace {

// The quad dot product check for `kLanes` lanes run by `dot`: unsigned bytes up to 255 and
// signed bytes down to -128, the extremes VPDPBUSD must not saturate.
template <int kLanes, class Dot>
SelfTest check_quad_dot(const char* unit, Dot dot) {
  alignas(64) uint8_t a[4 * kLanes];
  alignas(64) int8_t b[4 * kLanes];
  alignas(64) int32_t c[kLanes];
  for (int i = 0; i < 4 * kLanes; ++i) {
    a[i] = uint8_t(i % 5 == 0 ? 255 : a_value(i / 4, i) + 4);
    b[i] = int8_t(i % 7 == 0 ? -128 : b_value(i, i / 4));
  }
  for (int lane = 0; lane < kLanes; ++lane) c[lane] = lane * 1000 - 7000;
  int32_t want[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) {
    want[lane] = c[lane];
    for (int j = 0; j < 4; ++j) want[lane] += int32_t(a[4 * lane + j]) * int32_t(b[4 * lane + j]);
  }
  if (!run_catching_sigill([&] { dot(a, b, c); })) return refused(unit);
  for (int lane = 0; lane < kLanes; ++lane)
    if (c[lane] != want[lane]) return {SelfTestOutcome::Failed, "VPDPBUSD: " + mismatch(0, lane, c[lane], want[lane])};
  return {SelfTestOutcome::Passed, std::to_string(kLanes) + "-lane u8 x s8 quad dot product matches the scalar path"};
}

}  // namespace

SelfTest check_avx512_vnni_dot() {
#if defined(__x86_64__)
  return check_quad_dot<16>("AVX512_VNNI VPDPBUSD", avx512_vnni_dot);
#else
  return {SelfTestOutcome::NotRun, "not an x86-64 build"};
#endif
}

SelfTest check_avx_vnni_dot() {
#if defined(__x86_64__)
  return check_quad_dot<8>("AVX-VNNI VPDPBUSD", avx_vnni_dot);
#else
  return {SelfTestOutcome::NotRun, "not an x86-64 build"};
#endif
}

}  // namespace g4
