#include "ops/matmul/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#endif

namespace g4::ops {

namespace {

inline float half_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}
inline void put_half(std::byte* p, float f) {
  const uint16_t h = f32_to_f16(f);
  std::memcpy(p, &h, 2);
}
inline const uint8_t* bytes(const std::byte* p) { return reinterpret_cast<const uint8_t*>(p); }

float dot_q8_0(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 32; ++k, b += 34, x += 32) {
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
    float s = 0;
    for (int j = 0; j < 32; ++j) s += float(q[j]) * x[j];
    total += s * half_at(b);
  }
  return total;
}

float dot_q4_0(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 32; ++k, b += 18, x += 32) {
    const uint8_t* q = bytes(b + 2);
    float s = 0;
    for (int j = 0; j < 16; ++j) s += float(int(q[j] & 0xF) - 8) * x[j] + float(int(q[j] >> 4) - 8) * x[j + 16];
    total += s * half_at(b);
  }
  return total;
}

float dot_q4_1(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 32; ++k, b += 20, x += 32) {
    const uint8_t* q = bytes(b + 4);
    float s = 0, sx = 0;
    for (int j = 0; j < 16; ++j) {
      s += float(q[j] & 0xF) * x[j] + float(q[j] >> 4) * x[j + 16];
      sx += x[j] + x[j + 16];
    }
    total += s * half_at(b) + sx * half_at(b + 2);
  }
  return total;
}

float dot_q4_k(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 256; ++k, b += 144) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* scales = bytes(b + 4);
    const uint8_t* q = bytes(b + 16);
    for (int c = 0; c < 4; ++c, q += 32, x += 64) {
      uint8_t sc0, m0, sc1, m1;
      kquant_scale_min(2 * c, scales, &sc0, &m0);
      kquant_scale_min(2 * c + 1, scales, &sc1, &m1);
      float s0 = 0, s1 = 0, x0 = 0, x1 = 0;
      for (int l = 0; l < 32; ++l) {
        s0 += float(q[l] & 0xF) * x[l];
        s1 += float(q[l] >> 4) * x[l + 32];
        x0 += x[l];
        x1 += x[l + 32];
      }
      total += d * (float(sc0) * s0 + float(sc1) * s1) - dmin * (float(m0) * x0 + float(m1) * x1);
    }
  }
  return total;
}

float dot_q5_k(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 256; ++k, b += 176) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* scales = bytes(b + 4);
    const uint8_t* qh = bytes(b + 16);
    const uint8_t* ql = bytes(b + 48);
    for (int c = 0; c < 4; ++c, ql += 32, x += 64) {
      uint8_t sc0, m0, sc1, m1;
      kquant_scale_min(2 * c, scales, &sc0, &m0);
      kquant_scale_min(2 * c + 1, scales, &sc1, &m1);
      const int sh0 = 2 * c, sh1 = 2 * c + 1;
      float s0 = 0, s1 = 0, x0 = 0, x1 = 0;
      for (int l = 0; l < 32; ++l) {
        s0 += float((ql[l] & 0xF) | (((qh[l] >> sh0) & 1) << 4)) * x[l];
        s1 += float((ql[l] >> 4) | (((qh[l] >> sh1) & 1) << 4)) * x[l + 32];
        x0 += x[l];
        x1 += x[l + 32];
      }
      total += d * (float(sc0) * s0 + float(sc1) * s1) - dmin * (float(m0) * x0 + float(m1) * x1);
    }
  }
  return total;
}

float dot_q6_k(const std::byte* b, const float* x, int64_t n) {
  float total = 0;
  for (int64_t k = 0; k < n / 256; ++k, b += 210) {
    const uint8_t* ql = bytes(b);
    const uint8_t* qh = bytes(b + 128);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    float acc = 0;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, x += 128) {
      float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // one per 16-value sub-block of this half
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        s[is] += float(int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * x[l];
        s[is + 2] += float(int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * x[l + 32];
        s[is + 4] += float(int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * x[l + 64];
        s[is + 6] += float(int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * x[l + 96];
      }
      for (int j = 0; j < 8; ++j) acc += float(sc[j]) * s[j];
    }
    total += d * acc;
  }
  return total;
}

float dot_float(DType t, const std::byte* b, const float* x, int64_t n) {
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

// ---- quantizers ----

inline int nearest(float v) { return int(std::lrintf(v)); }

#if defined(__x86_64__)
// Q8_0 and Q4_0 on AVX-512, bit-identical to the scalar quantizers below (tested): the block's
// scale is computed by the same scalar steps from the same maximum, and the values are rounded
// by VCVTPS2DQ, which rounds to nearest even as lrintf does in the default mode. A block holding
// a NaN or an infinity goes to the scalar code, whose comparisons define what such a block gives.

// The block's two halves, or false when a value is not finite.
G4_TARGET_AVX512F_BW_VL inline bool load_finite(const float* x, __m512* x0, __m512* x1) {
  *x0 = _mm512_loadu_ps(x);
  *x1 = _mm512_loadu_ps(x + 16);
  const __m512 big = _mm512_set1_ps(3.4028235e38f);
  return !(_mm512_cmp_ps_mask(_mm512_abs_ps(*x0), big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(_mm512_abs_ps(*x1), big, _CMP_NLE_UQ));
}

// round(x · id) clamped to [lo, hi], as int32 lanes.
G4_TARGET_AVX512F_BW_VL inline __m512i round_clamped(__m512 x, float id, int lo, int hi) {
  const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(id)));
  return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

void quant_q8_0_block(const float* x, std::byte* b);
void quant_q4_0_block(const float* x, std::byte* b);

G4_TARGET_AVX512F_BW_VL void quant_q8_0_avx512(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / 32; ++k, x += 32, b += 34) {
    __m512 x0, x1;
    if (!load_finite(x, &x0, &x1)) {
      quant_q8_0_block(x, b);
      continue;
    }
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float d = round_to_f16(amax / 127.0f);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 2), _mm512_cvtepi32_epi8(round_clamped(x0, id, -127, 127)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 18), _mm512_cvtepi32_epi8(round_clamped(x1, id, -127, 127)));
  }
}

G4_TARGET_AVX512F_BW_VL void quant_q4_0_avx512(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / 32; ++k, x += 32, b += 18) {
    __m512 x0, x1;
    if (!load_finite(x, &x0, &x1)) {
      quant_q4_0_block(x, b);
      continue;
    }
    const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    // The scalar loop keeps the first value of largest magnitude, with its sign (0 if none is > 0).
    float max = 0;
    if (amax > 0) {
      const __m512 m = _mm512_set1_ps(amax);
      const uint32_t at = uint32_t(_mm512_cmp_ps_mask(a0, m, _CMP_EQ_OQ)) | uint32_t(_mm512_cmp_ps_mask(a1, m, _CMP_EQ_OQ)) << 16;
      max = x[__builtin_ctz(at)];
    }
    const float d = round_to_f16(max / -8.0f);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    const __m512i q0 = _mm512_add_epi32(round_clamped(x0, id, -8, 7), _mm512_set1_epi32(8));
    const __m512i q1 = _mm512_add_epi32(round_clamped(x1, id, -8, 7), _mm512_set1_epi32(8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 2), _mm512_cvtepi32_epi8(_mm512_or_si512(q0, _mm512_slli_epi32(q1, 4))));
  }
}
#endif

void quant_q8_0_block(const float* x, std::byte* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = round_to_f16(amax / 127.0f);
  const float id = d ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = std::byte(uint8_t(int8_t(std::clamp(nearest(x[j] * id), -127, 127))));
}

void quant_q4_0_block(const float* x, std::byte* b) {
  float amax = 0, max = 0;  // max: the value of largest magnitude, with its sign
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = round_to_f16(max / -8.0f);
  const float id = d ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::clamp(nearest(x[j] * id) + 8, 0, 15);
    const int q1 = std::clamp(nearest(x[j + 16] * id) + 8, 0, 15);
    b[2 + j] = std::byte(uint8_t(q0 | (q1 << 4)));
  }
}

void quant_q8_0(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / 32; ++k) quant_q8_0_block(x + 32 * k, b + 34 * k);
}

void quant_q4_0(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / 32; ++k) quant_q4_0_block(x + 32 * k, b + 18 * k);
}

void quant_q4_1(const float* x, std::byte* b, int64_t n) {
  for (int64_t k = 0; k < n / 32; ++k, x += 32, b += 20) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; ++j) {
      mn = std::min(mn, x[j]);
      mx = std::max(mx, x[j]);
    }
    const float d = round_to_f16((mx - mn) / 15.0f);
    const float m = round_to_f16(mn);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    put_half(b + 2, m);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::clamp(nearest((x[j] - m) * id), 0, 15);
      const int q1 = std::clamp(nearest((x[j + 16] - m) * id), 0, 15);
      b[4 + j] = std::byte(uint8_t(q0 | (q1 << 4)));
    }
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with x ≈ d·sc_j·q − dmin·m_j, q in [0, levels].
void quant_kx(const float* x, std::byte* b, int levels, bool five) {
  float scale[8], minv[8];
  for (int j = 0; j < 8; ++j) {
    float mn = 0, mx = 0;  // the min is clamped to <= 0 (m_j >= 0), as ggml does
    for (int l = 0; l < 32; ++l) {
      mn = std::min(mn, x[32 * j + l]);
      mx = std::max(mx, x[32 * j + l]);
    }
    scale[j] = (mx - mn) / float(levels);
    minv[j] = -mn;
  }
  const float max_scale = *std::max_element(scale, scale + 8), max_min = *std::max_element(minv, minv + 8);
  const float d = round_to_f16(max_scale / 63.0f), dmin = round_to_f16(max_min / 63.0f);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = uint8_t(d ? std::clamp(nearest(scale[j] / d), 0, 63) : 0);
    m[j] = uint8_t(dmin ? std::clamp(nearest(minv[j] / dmin), 0, 63) : 0);
  }
  put_half(b, d);
  put_half(b + 2, dmin);
  uint8_t* s = reinterpret_cast<uint8_t*>(b + 4);
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = uint8_t((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float dj = d * float(sc[j]), mj = dmin * float(m[j]);
    const float id = dj ? 1.0f / dj : 0.0f;
    for (int l = 0; l < 32; ++l) q[32 * j + l] = uint8_t(std::clamp(nearest((x[32 * j + l] + mj) * id), 0, levels));
  }
  uint8_t* qh = five ? reinterpret_cast<uint8_t*>(b + 16) : nullptr;
  uint8_t* ql = reinterpret_cast<uint8_t*>(b + (five ? 48 : 16));
  if (qh) std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      ql[32 * c + l] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
      if (qh) qh[l] = uint8_t(qh[l] | (((lo >> 4) & 1) << (2 * c)) | (((hi >> 4) & 1) << (2 * c + 1)));
    }
}

void quant_q6_k(const float* x, std::byte* b) {
  float scale[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
    scale[j] = amax / 31.0f;
  }
  const float d = round_to_f16(*std::max_element(scale, scale + 16) / 127.0f);
  int8_t sc[16];
  for (int j = 0; j < 16; ++j) sc[j] = int8_t(d ? std::clamp(nearest(scale[j] / d), 0, 127) : 0);
  uint8_t q[256];
  for (int j = 0; j < 16; ++j) {
    const float dj = d * float(sc[j]);
    const float id = dj ? 1.0f / dj : 0.0f;
    for (int l = 0; l < 16; ++l) q[16 * j + l] = uint8_t(std::clamp(nearest(x[16 * j + l] * id), -32, 31) + 32);
  }
  uint8_t* ql = reinterpret_cast<uint8_t*>(b);
  uint8_t* qh = reinterpret_cast<uint8_t*>(b + 128);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = q[128 * h + l], q2 = q[128 * h + l + 32], q3 = q[128 * h + l + 64], q4 = q[128 * h + l + 96];
      ql[64 * h + l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[64 * h + l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[32 * h + l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  std::memcpy(b + 192, sc, 16);
  put_half(b + 208, d);
}

}  // namespace

float quant_dot(DType t, const std::byte* row, const float* x, int64_t n) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return dot_float(t, row, x, n);
    case DType::Q8_0: return dot_q8_0(row, x, n);
    case DType::Q4_0: return dot_q4_0(row, x, n);
    case DType::Q4_1: return dot_q4_1(row, x, n);
    case DType::Q4_K: return dot_q4_k(row, x, n);
    case DType::Q5_K: return dot_q5_k(row, x, n);
    case DType::Q6_K: return dot_q6_k(row, x, n);
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
  if (simd && t == DType::Q8_0) return quant_q8_0_avx512(x, dst, n);
  if (simd && t == DType::Q4_0) return quant_q4_0_avx512(x, dst, n);
#else
  (void)simd;
#endif
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
    case DType::Q8_0: return quant_q8_0(x, dst, n);
    case DType::Q4_0: return quant_q4_0(x, dst, n);
    case DType::Q4_1: return quant_q4_1(x, dst, n);
    case DType::Q4_K:
      for (int64_t k = 0; k < n / 256; ++k) quant_kx(x + k * 256, dst + k * 144, 15, false);
      return;
    case DType::Q5_K:
      for (int64_t k = 0; k < n / 256; ++k) quant_kx(x + k * 256, dst + k * 176, 31, true);
      return;
    case DType::Q6_K:
      for (int64_t k = 0; k < n / 256; ++k) quant_q6_k(x + k * 256, dst + k * 210);
      return;
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
