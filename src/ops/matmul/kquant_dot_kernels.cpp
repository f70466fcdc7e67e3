// Highway multi-target compilation: this file is re-included once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul/kquant_dot_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "ops/matmul/kquant_dot_kernels.h"
#include "ops/isa/widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::Rebind<int32_t, DF>;
using DU = hn::Rebind<uint32_t, DF>;
using D8 = hn::Rebind<uint8_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

constexpr size_t kMaxLanes = 16;  // AVX-512; narrower targets take more vectors per sub-block
constexpr size_t kMinLanes = 4;   // 16-value Q6_K sub-blocks are whole vectors down to SSE4

// Lanes [0, N) of the bytes at p, widened to int32.
HWY_INLINE VI Bytes(const uint8_t* p) {
  return hn::BitCast(DI(), hn::PromoteTo(DU(), hn::LoadU(D8(), p)));
}

// d·sc_j and dmin·m_j of a Q4_K / Q5_K super-block's 8 sub-blocks: dsc[j] and dmn[8 + j] (both
// arrays 16 floats; the other halves are scratch).
HWY_INLINE void SubBlockScales(const std::byte* blk, float* dsc, float* dmn) {
  uint8_t sm[16];
  kquant_scales_mins(reinterpret_cast<const uint8_t*>(blk + q4_k::kScalesAt), sm);
  const DF d;
  const VF vd = hn::Set(d, F16At(blk + q4_k::kDAt)), vmin = hn::Set(d, F16At(blk + q4_k::kDminAt));
  for (size_t k = 0; k < 16; k += hn::Lanes(d)) {
    const VF v = hn::ConvertTo(d, Bytes(sm + k));
    hn::StoreU(hn::Mul(v, vd), d, dsc + k);
    hn::StoreU(hn::Mul(v, vmin), d, dmn + k);
  }
}

// Q4_K (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes) and Q5_K (176 bytes: the
// same head, 32 bytes of fifth bits, then the nibbles). Chunk c of 64 values: byte l of its 32
// holds value l (low nibble, sub-block 2c) and value 32 + l (high nibble, sub-block 2c + 1); for
// Q5_K bit 2c / 2c + 1 of fifth-bit byte l adds 16. Value = d·sc·q − dmin·m. Per row and
// sub-block: sq = Σ q·x and sx = Σ x lane-wise, then acc += (d·sc)·sq − (dmin·m)·sx.
template <bool kQ5, int R>
void DotRowsQ45K(const float* x, const std::byte* w, size_t rb, size_t n, float* out) {
  const DF d;
  const DI di;
  constexpr size_t kBlockBytes = kQ5 ? q5_k::kBlockBytes : q4_k::kBlockBytes,
                   kNibbles = kQ5 ? q5_k::kQsAt : q4_k::kQsAt;
  constexpr size_t kMaxPer32 = 32 / kMinLanes;
  const size_t N = hn::Lanes(d), per32 = std::min(32 / N, kMaxPer32);  // DotRowsKQuant checks N >= 4
  const VI low = hn::Set(di, 15), one = hn::Set(di, 1);
  VF acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  for (size_t sb = 0; sb < n / q4_k::kBlockValues; ++sb) {
    float dsc[R][16], dmn[R][16];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) SubBlockScales(w + size_t(r) * rb + sb * kBlockBytes, dsc[r], dmn[r]);
    for (int c = 0; c < 4; ++c) {
      const float* xc = x + sb * q4_k::kBlockValues + size_t(c) * 64;
      VF x0[kMaxPer32], x1[kMaxPer32];  // the chunk's two halves
      VF sx0 = hn::Zero(d), sx1 = hn::Zero(d);
      for (size_t k = 0; k < per32; ++k) {
        x0[k] = hn::LoadU(d, xc + k * N);
        x1[k] = hn::LoadU(d, xc + 32 + k * N);
        sx0 = hn::Add(sx0, x0[k]);
        sx1 = hn::Add(sx1, x1[k]);
      }
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const std::byte* blk = w + size_t(r) * rb + sb * kBlockBytes;
        const uint8_t* q = reinterpret_cast<const uint8_t*>(blk + kNibbles) + c * 32;
        VF sq0 = hn::Zero(d), sq1 = hn::Zero(d);
        for (size_t k = 0; k < per32; ++k) {
          const VI b = Bytes(q + k * N);
          VI lo = hn::And(b, low), hi = hn::ShiftRight<4>(b);
          if constexpr (kQ5) {
            const VI h = Bytes(reinterpret_cast<const uint8_t*>(blk + q5_k::kQhAt) + k * N);
            lo = hn::Or(lo, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c), one)));
            hi = hn::Or(hi, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c + 1), one)));
          }
          sq0 = hn::MulAdd(hn::ConvertTo(d, lo), x0[k], sq0);
          sq1 = hn::MulAdd(hn::ConvertTo(d, hi), x1[k], sq1);
        }
        acc[r] = hn::MulAdd(hn::Set(d, dsc[r][2 * c]), sq0, acc[r]);
        acc[r] = hn::NegMulAdd(hn::Set(d, dmn[r][8 + 2 * c]), sx0, acc[r]);
        acc[r] = hn::MulAdd(hn::Set(d, dsc[r][2 * c + 1]), sq1, acc[r]);
        acc[r] = hn::NegMulAdd(hn::Set(d, dmn[r][8 + 2 * c + 1]), sx1, acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
}

// acc + scale · (q − 32) · x lane-wise, for one vector of 6-bit codes q.
HWY_INLINE VF Q6Term(VI q, VF x, float scale, VF acc) {
  const VF v = hn::ConvertTo(DF(), hn::Sub(q, hn::Set(DI(), 32)));
  return hn::MulAdd(hn::Set(DF(), scale), hn::Mul(v, x), acc);
}

// Q6_K (210 bytes: 128 bytes of low nibbles ql, 64 of high bit pairs qh, 16 int8 scales, f16 d).
// Half h (128 values) reads ql[64h, 64h + 64), qh[32h, 32h + 32), scales[8h, 8h + 8); for l < 32:
//   value l      = (ql[l] & 15      | (qh[l] & 3) << 4)      − 32   sub-block     l / 16
//   value 32 + l = (ql[32 + l] & 15 | (qh[l] >> 2 & 3) << 4) − 32   sub-block 2 + l / 16
//   value 64 + l = (ql[l] >> 4      | (qh[l] >> 4 & 3) << 4) − 32   sub-block 4 + l / 16
//   value 96 + l = (ql[32 + l] >> 4 | (qh[l] >> 6) << 4)      − 32   sub-block 6 + l / 16
// times d·scale. A vector of N <= 16 lanes over l lies in one 16-value sub-block.
template <int R>
void DotRowsQ6K(const float* x, const std::byte* w, size_t rb, size_t n, float* out) {
  const DF d;
  const DI di;
  const size_t N = hn::Lanes(d);
  const VI low = hn::Set(di, 15), two_bits = hn::Set(di, 3);
  VF acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  for (size_t sb = 0; sb < n / q6_k::kBlockValues; ++sb) {
    float scales[R][16];  // d · scale of the 16 sub-blocks, per row
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + size_t(r) * rb + sb * q6_k::kBlockBytes;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + q6_k::kScalesAt);
      const VF dd = hn::Set(d, F16At(blk + q6_k::kDAt));
      for (size_t k = 0; k < 16; k += N)
        hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(hn::Rebind<int8_t, DF>(), sc + k))), dd), d,
                   scales[r] + k);
    }
    for (int h = 0; h < 2; ++h) {
      const float* xh = x + sb * q6_k::kBlockValues + size_t(h) * 128;
      for (size_t l = 0; l < 32; l += N) {
        const VF x0 = hn::LoadU(d, xh + l), x1 = hn::LoadU(d, xh + 32 + l), x2 = hn::LoadU(d, xh + 64 + l),
                 x3 = hn::LoadU(d, xh + 96 + l);
        const size_t s = 8 * size_t(h) + l / 16;  // the sub-block of value l of this half (32 + l: s + 2, ...)
        #pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const uint8_t* ql = reinterpret_cast<const uint8_t*>(w + size_t(r) * rb + sb * q6_k::kBlockBytes) + 64 * h;
          const uint8_t* qh = ql + 128 - 32 * h;  // the block's qh at +128, this half's 32 bytes on
          const VI a = Bytes(ql + l), b = Bytes(ql + 32 + l), hb = Bytes(qh + l);
          acc[r] = Q6Term(hn::Or(hn::And(a, low), hn::ShiftLeft<4>(hn::And(hb, two_bits))), x0, scales[r][s], acc[r]);
          acc[r] = Q6Term(hn::Or(hn::And(b, low), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hb), two_bits))), x1,
                          scales[r][2 + s], acc[r]);
          acc[r] = Q6Term(hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hb), two_bits))), x2,
                          scales[r][4 + s], acc[r]);
          acc[r] = Q6Term(hn::Or(hn::ShiftRight<4>(b), hn::ShiftLeft<4>(hn::ShiftRight<6>(hb))), x3, scales[r][6 + s],
                          acc[r]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
}

template <int R>
bool DotRowsKQuantR(const float* x, const std::byte* w, size_t rb, DType dtype, size_t n, float* out) {
  switch (dtype) {
    case DType::Q4_K: DotRowsQ45K<false, R>(x, w, rb, n, out); return true;
    case DType::Q5_K: DotRowsQ45K<true, R>(x, w, rb, n, out); return true;
    case DType::Q6_K: DotRowsQ6K<R>(x, w, rb, n, out); return true;
    default: return false;
  }
}

bool DotRowsKQuant(const float* x, const std::byte* w, size_t rb, DType dtype, size_t n, int rows, float* out) {
  const size_t N = hn::Lanes(DF());
  if (n % q4_k::kBlockValues || N < kMinLanes || N > kMaxLanes) return false;
  switch (rows) {
    case 1: return DotRowsKQuantR<1>(x, w, rb, dtype, n, out);
    case 2: return DotRowsKQuantR<2>(x, w, rb, dtype, n, out);
    case 3: return DotRowsKQuantR<3>(x, w, rb, dtype, n, out);
    case 4: return DotRowsKQuantR<4>(x, w, rb, dtype, n, out);
    default: return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace g4::ops {
HWY_EXPORT(DotRowsKQuant);

bool dot_rows_kquant(const float* x, const std::byte* w, size_t row_bytes, DType dtype, size_t n, int rows, float* out) {
  if (!dtype_is_kquant(dtype)) return false;
  return HWY_DYNAMIC_DISPATCH(DotRowsKQuant)(x, w, row_bytes, dtype, n, rows, out);
}
}  // namespace g4::ops
#endif
