// Highway multi-target compilation: this file is re-included once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul/dot_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ops/matmul/dot_kernels.h"
#include "ops/isa/widen-inl.h"
#include "platform/error.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pins v in a register: the compiler otherwise folds the same activation load into each of the
// R FMAs that use it, and the micro-tile becomes bound by loads instead of FMAs.
template <class V>
HWY_INLINE V InRegister(V v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSSE3
  asm("" : "+v"(v.raw));
#endif
  return v;
}

// y[t · ldy + r] = x_t · w_r for TB tokens (x_t = x + t · ldx) and R weight rows (w_r = w + r · ldw,
// stored as T, widened in registers): the one kernel behind both decode (DotRows, TB = 1) and
// prefill (DotPanel), so a product is the same bits whichever computed it. Per (t, r): lane-wise
// accumulator a over chunks 0, 2, 4, ..., b over 1, 3, 5, ..., a last single chunk into a,
// SumOfLanes(a + b), then the scalar tail in order. Each load of w serves TB tokens, each load
// of x R rows. prefetch > 0: each row's bytes that far ahead are requested with software
// prefetch (one row = one stream, continuing in row r + R: decode calls on R rows at a time).
template <int TB, int R, typename T>
HWY_INLINE void DotTile(const float* x, size_t ldx, const T* w, size_t ldw, size_t n, size_t prefetch, float* y,
                        size_t ldy) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V a[TB][R], b[TB][R];
  #pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[t][r] = b[t][r] = hn::Zero(d);
  // Prefetch target: `ahead` bytes along row r's stream, which runs on past the row's end into
  // row r + R (what the next call of this decode loop reads), not into row r + 1 (another stream
  // of this call); skip = the extra rows' bytes once the target has left row r.
  const size_t row_bytes = ldw * sizeof(T);
  size_t ahead = prefetch, skip = 0, wrap = row_bytes;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    if (prefetch) {
      for (; ahead >= wrap; wrap += row_bytes) skip += size_t(R - 1) * row_bytes;
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) hwy::Prefetch(reinterpret_cast<const char*>(w + r * ldw) + ahead + skip);
      ahead += 2 * N * sizeof(T);
    }
    V w0[R], w1[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w0[r] = LoadWidened(d, w + r * ldw + i);
      w1[r] = LoadWidened(d, w + r * ldw + i + N);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const V x0 = InRegister(hn::LoadU(d, x + t * ldx + i)), x1 = InRegister(hn::LoadU(d, x + t * ldx + i + N));
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        a[t][r] = hn::MulAdd(x0, w0[r], a[t][r]);
        b[t][r] = hn::MulAdd(x1, w1[r], b[t][r]);
      }
    }
  }
  for (; i + N <= n; i += N)
    #pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const V x0 = hn::LoadU(d, x + t * ldx + i);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[t][r] = hn::MulAdd(x0, LoadWidened(d, w + r * ldw + i), a[t][r]);
    }
  #pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(a[t][r], b[t][r])));
      for (size_t j = i; j < n; ++j) sum += x[t * ldx + j] * ScalarF(w[r * ldw + j]);
      y[t * ldy + r] = sum;
    }
}

// R rows (1-8) share each load of x (decode: one token).
template <int R, typename T>
HWY_INLINE void DotRowsR(const float* x, const T* w, size_t n, size_t stride, size_t prefetch, float* out) {
  DotTile<1, R>(x, 0, w, stride, n, prefetch, out, 0);
}

template <typename T>
void DotRowsT(const float* x, const T* w, size_t n, size_t stride, int rows, size_t prefetch, float* out) {
  switch (rows) {
    case 1: return DotRowsR<1>(x, w, n, stride, prefetch, out);
    case 2: return DotRowsR<2>(x, w, n, stride, prefetch, out);
    case 3: return DotRowsR<3>(x, w, n, stride, prefetch, out);
    case 4: return DotRowsR<4>(x, w, n, stride, prefetch, out);
    case 5: return DotRowsR<5>(x, w, n, stride, prefetch, out);
    case 6: return DotRowsR<6>(x, w, n, stride, prefetch, out);
    case 7: return DotRowsR<7>(x, w, n, stride, prefetch, out);
    case 8: return DotRowsR<8>(x, w, n, stride, prefetch, out);
    default: return;  // dot_rows checks
  }
}

void DotRows(const float* x, const void* w, DType dtype, size_t n, size_t stride, int rows, float* out, size_t prefetch) {
  switch (dtype) {
    case DType::F32: return DotRowsT(x, static_cast<const float*>(w), n, stride, rows, prefetch, out);
    case DType::BF16: return DotRowsT(x, static_cast<const hwy::bfloat16_t*>(w), n, stride, rows, prefetch, out);
    case DType::F16: return DotRowsT(x, static_cast<const hwy::float16_t*>(w), n, stride, rows, prefetch, out);
    default: return;  // callers route other dtypes to the reference loop
  }
}

// y[t · ldy + r] = x_t · w_r for t < T, r < rows (f32 rows w_r = w + r · ldw). Token blocks of
// kTB outer, row pairs inner: the block's activations stay in L1 while the rows (a panel the
// caller sized to L2) stream past them. Each block is first copied to 64-byte-aligned rows: an
// unaligned 64-byte load spans two cache lines and costs two loads.
void DotPanel(const float* x, size_t T, size_t n, const float* w, size_t ldw, size_t rows, float* y, size_t ldy) {
  // 4 x 2 micro-tiles need 16 accumulators + 8 operands: only targets with 32 vector
  // registers (AVX-512) hold them; others take 2 x 2.
#if HWY_TARGET <= HWY_AVX3
  constexpr size_t kTB = 4;
#else
  constexpr size_t kTB = 2;
#endif
  const size_t ldx = (n + 15) / 16 * 16;
  thread_local hwy::AlignedFreeUniquePtr<float[]> block;
  thread_local size_t block_size = 0;
  if (block_size < kTB * ldx) {
    block = hwy::AllocateAligned<float>(kTB * ldx);
    block_size = kTB * ldx;
  }
  float* const xb = block.get();
  for (size_t t = 0; t < T; t += kTB) {
    const size_t tb = std::min(kTB, T - t);
    for (size_t j = 0; j < tb; ++j) std::memcpy(xb + j * ldx, x + (t + j) * n, n * sizeof(float));
    float* const yt = y + t * ldy;
    size_t r = 0;
    if (tb == kTB) {
      for (; r + 2 <= rows; r += 2) DotTile<kTB, 2>(xb, ldx, w + r * ldw, ldw, n, 0, yt + r, ldy);
      if (r < rows) DotTile<kTB, 1>(xb, ldx, w + r * ldw, ldw, n, 0, yt + r, ldy);
      continue;
    }
    for (size_t j = 0; j < tb; ++j) {
      for (r = 0; r + 2 <= rows; r += 2) DotTile<1, 2>(xb + j * ldx, ldx, w + r * ldw, ldw, n, 0, yt + j * ldy + r, ldy);
      if (r < rows) DotTile<1, 1>(xb + j * ldx, ldx, w + r * ldw, ldw, n, 0, yt + j * ldy + r, ldy);
    }
  }
}

template <typename T>
void WidenT(const T* src, size_t n, float* dst) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadWidened(d, src + i), d, dst + i);
  for (; i < n; ++i) {
    if constexpr (std::is_same_v<T, hwy::bfloat16_t>) dst[i] = hwy::F32FromBF16(src[i]);
    else dst[i] = F16Scalar(src[i]);
  }
}

void WidenRow(const void* src, DType dtype, size_t n, float* dst) {
  switch (dtype) {
    case DType::F32: {
      const float* s = static_cast<const float*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::BF16: return WidenT(static_cast<const hwy::bfloat16_t*>(src), n, dst);
    case DType::F16: return WidenT(static_cast<const hwy::float16_t*>(src), n, dst);
    default: return;
  }
}

// Q8_0 block: f16 scale d, then 32 int8 q; value = d · q.
float DotQ8_0(const float* x, const std::byte* row, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const size_t N = hn::Lanes(d);
  auto acc = hn::Zero(d);
  float tail = 0;
  for (size_t b = 0; b < n / q8_0::kBlockValues; ++b) {
    const std::byte* blk = row + b * q8_0::kBlockBytes;
    uint16_t h;
    std::memcpy(&h, blk + q8_0::kDAt, 2);
    const float scale = g4::f16_to_f32(h);
    const int8_t* q = reinterpret_cast<const int8_t*>(blk + q8_0::kQsAt);
    const float* xb = x + b * q8_0::kBlockValues;
    if (N <= size_t(q8_0::kBlockValues)) {
      const auto vs = hn::Set(d, scale);
      for (size_t j = 0; j < size_t(q8_0::kBlockValues); j += N) {
        const auto qv = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + j)));
        acc = hn::MulAdd(hn::Mul(hn::LoadU(d, xb + j), vs), qv, acc);
      }
    } else {
      for (size_t j = 0; j < size_t(q8_0::kBlockValues); ++j) tail += scale * xb[j] * float(q[j]);
    }
  }
  return hn::GetLane(hn::SumOfLanes(d, acc)) + tail;
}

// Q4_0 block: f16 scale d, then 16 bytes; byte j holds value j (low nibble) and value j + 16
// (high nibble); value = d · (nibble - 8).
float DotQ4_0(const float* x, const std::byte* row, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const size_t N = hn::Lanes(d);
  auto acc = hn::Zero(d);
  float tail = 0;
  const auto low_mask = hn::Set(di, 15);
  const auto eight = hn::Set(d, 8.0f);
  for (size_t b = 0; b < n / q4_0::kBlockValues; ++b) {
    const std::byte* blk = row + b * q4_0::kBlockBytes;
    uint16_t h;
    std::memcpy(&h, blk + q4_0::kDAt, 2);
    const float scale = g4::f16_to_f32(h);
    const uint8_t* q = reinterpret_cast<const uint8_t*>(blk + q4_0::kQsAt);
    const float* xb = x + b * q4_0::kBlockValues;
    if (N <= 16) {
      const auto vs = hn::Set(d, scale);
      for (size_t j = 0; j < 16; j += N) {
        const auto bytes = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<decltype(di)>(), hn::LoadU(d8, q + j)));
        const auto lo = hn::Sub(hn::ConvertTo(d, hn::And(bytes, low_mask)), eight);
        const auto hi = hn::Sub(hn::ConvertTo(d, hn::ShiftRight<4>(bytes)), eight);
        acc = hn::MulAdd(hn::Mul(hn::LoadU(d, xb + j), vs), lo, acc);
        acc = hn::MulAdd(hn::Mul(hn::LoadU(d, xb + q4_0::kQsBytes + j), vs), hi, acc);
      }
    } else {
      for (size_t j = 0; j < 16; ++j) {
        tail += scale * xb[j] * float(int(q[j] & 15) - 8);
        tail += scale * xb[16 + j] * float(int(q[j] >> 4) - 8);
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(d, acc)) + tail;
}

// Up to 4 rows of Q8_0 / Q4_0 blocks against one x: the 32 x values of a block are loaded once
// for all rows; each row sums x·q over the block in f32, then adds scale · that sum.
template <bool kQ4, int R>
void DotRowsBlocksT(const float* x, const std::byte* w, size_t rb, size_t n, float* out) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  constexpr size_t kMaxChunks = 8;  // 32 / 4 lanes (SSE4); AVX-512 uses 2
  const size_t N = hn::Lanes(d);
  const size_t chunks = std::min<size_t>(q8_0::kBlockValues / N, kMaxChunks);  // N >= 4: DotRowsBlocks checks
  const size_t bb = kQ4 ? q4_0::kBlockBytes : q8_0::kBlockBytes;
  decltype(hn::Zero(d)) acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  for (size_t b = 0; b < n / q8_0::kBlockValues; ++b) {
    decltype(hn::Zero(d)) xv[kMaxChunks];
    for (size_t j = 0; j < chunks; ++j) xv[j] = hn::LoadU(d, x + b * q8_0::kBlockValues + j * N);
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w + size_t(r) * rb + b * bb;
      auto sum = hn::Zero(d);
      if constexpr (kQ4) {
        const hn::Rebind<uint8_t, decltype(d)> d8;
        const uint8_t* q = reinterpret_cast<const uint8_t*>(blk + q4_0::kQsAt);
        const size_t half = chunks / 2;  // byte j holds value j (low nibble) and value j + 16 (high)
        for (size_t c = 0; c < half; ++c) {
          const auto bytes = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<decltype(di)>(), hn::LoadU(d8, q + c * N)));
          const auto lo = hn::ConvertTo(d, hn::Sub(hn::And(bytes, hn::Set(di, 15)), hn::Set(di, 8)));
          const auto hi = hn::ConvertTo(d, hn::Sub(hn::ShiftRight<4>(bytes), hn::Set(di, 8)));
          sum = hn::MulAdd(xv[c], lo, sum);
          sum = hn::MulAdd(xv[half + c], hi, sum);
        }
      } else {
        const hn::Rebind<int8_t, decltype(d)> d8;
        const int8_t* q = reinterpret_cast<const int8_t*>(blk + q8_0::kQsAt);
        for (size_t j = 0; j < chunks; ++j)
          sum = hn::MulAdd(xv[j], hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + j * N))), sum);
      }
      acc[r] = hn::MulAdd(hn::Set(d, F16At(blk + q8_0::kDAt)), sum, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
}

bool DotRowsBlocks(const float* x, const std::byte* w, size_t rb, DType dtype, size_t n, int rows, float* out) {
  const hn::ScalableTag<float> d;
  if (n % q8_0::kBlockValues || hn::Lanes(d) > 16 || hn::Lanes(d) < 4 || (dtype != DType::Q8_0 && dtype != DType::Q4_0)) return false;
  const bool q4 = dtype == DType::Q4_0;
  switch (rows) {
    case 1: q4 ? DotRowsBlocksT<true, 1>(x, w, rb, n, out) : DotRowsBlocksT<false, 1>(x, w, rb, n, out); break;
    case 2: q4 ? DotRowsBlocksT<true, 2>(x, w, rb, n, out) : DotRowsBlocksT<false, 2>(x, w, rb, n, out); break;
    case 3: q4 ? DotRowsBlocksT<true, 3>(x, w, rb, n, out) : DotRowsBlocksT<false, 3>(x, w, rb, n, out); break;
    case 4: q4 ? DotRowsBlocksT<true, 4>(x, w, rb, n, out) : DotRowsBlocksT<false, 4>(x, w, rb, n, out); break;
    default: return false;
  }
  return true;
}

bool DotRowBlocks(const float* x, const std::byte* row, DType dtype, size_t n, float* out) {
  if (n % q8_0::kBlockValues) return false;
  if (dtype == DType::Q8_0) *out = DotQ8_0(x, row, n);
  else if (dtype == DType::Q4_0) *out = DotQ4_0(x, row, n);
  else return false;
  return true;
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace g4::ops {
HWY_EXPORT(DotRows);
HWY_EXPORT(DotPanel);
HWY_EXPORT(WidenRow);
HWY_EXPORT(TargetName);
HWY_EXPORT(DotRowBlocks);
HWY_EXPORT(DotRowsBlocks);

bool dot_rows_blocks(const float* x, const std::byte* w, size_t row_bytes, DType dtype, size_t n, int rows, float* out) {
  return HWY_DYNAMIC_DISPATCH(DotRowsBlocks)(x, w, row_bytes, dtype, n, rows, out);
}

bool dot_row_blocks(const float* x, const std::byte* row, DType dtype, size_t n, float* out) {
  return HWY_DYNAMIC_DISPATCH(DotRowBlocks)(x, row, dtype, n, out);
}

void dot_rows(const float* x, const void* w, DType dtype, size_t n, size_t row_stride, int rows, float* out,
              size_t prefetch_bytes) {
  if (rows < 1 || rows > kMaxDotRows)
    throw Error("dot_rows: " + std::to_string(rows) + " rows; 1 to " + std::to_string(kMaxDotRows) + " share a call");
  HWY_DYNAMIC_DISPATCH(DotRows)(x, w, dtype, n, row_stride, rows, out, prefetch_bytes);
}
void dot_panel(const float* x, size_t T, size_t n, const float* w, size_t ldw, size_t rows, float* y, size_t ldy) {
  if (ldw < n || (T > 1 && ldy < rows))
    throw Error("dot_panel: row strides ldw " + std::to_string(ldw) + " (n " + std::to_string(n) + "), ldy " +
                std::to_string(ldy) + " (rows " + std::to_string(rows) + ") would overlap rows");
  HWY_DYNAMIC_DISPATCH(DotPanel)(x, T, n, w, ldw, rows, y, ldy);
}
void widen_row(const void* src, DType dtype, size_t n, float* dst) { HWY_DYNAMIC_DISPATCH(WidenRow)(src, dtype, n, dst); }
const char* dot_kernel_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
}  // namespace g4::ops
#endif
