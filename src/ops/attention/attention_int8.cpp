#include "ops/attention/attention_int8.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/matmul/gemm_q8.h"
#include "platform/aligned_rows.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/quantize_int8.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"

#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

namespace {
// Σ q8·k8 stays exact in f32 up to 2^24: hd · 127 · 127 < 2^24 for hd <= 1040.
constexpr int64_t kMaxHeadDim = 1040;
}  // namespace

#if defined(__x86_64__)
namespace {

constexpr int64_t kTile = kAttendTile;
constexpr int64_t kPadRows = 16;  // score blocks take up to 16 positions; the pad rows are zero

inline __mmask64 mask64(int64_t count) { return count >= 64 ? ~__mmask64(0) : __mmask64((uint64_t(1) << count) - 1); }
inline __mmask16 mask16(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// Σ (k8 + 128) · q8 for R query rows ([R, qs] int8, zero past hd) against P = 16 / R key rows,
// 64 elements per VPDPBUSD: sums[r * P + p]. Keys past hd load as 0 (+128 after the flip) and
// meet the queries' zero padding.
template <int R>
G4_TARGET_AVX512F_BW_VL_VNNI void score_block(const int8_t* q8, int64_t qs, int64_t hd, const int8_t* const* krow,
                                              int32_t* sums) {
  constexpr int P = 16 / R;
  const __m512i flip = _mm512_set1_epi8(char(0x80));  // k8 + 128 as an unsigned byte
  __m512i acc[16];
  #pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_si512();
  for (int64_t i = 0; i < hd; i += 64) {
    const __mmask64 mk = mask64(hd - i);
    __m512i kv[P];
    #pragma GCC unroll 16
    for (int p = 0; p < P; ++p) kv[p] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, krow[p] + i), flip);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i qv = _mm512_load_si512(q8 + r * qs + i);
      #pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[r * P + p] = _mm512_dpbusd_epi32(acc[r * P + p], kv[p], qv);
    }
  }
  // The 16 sums' lanes added by one shuffle tree (exact: int32).
  _mm512_store_ps(reinterpret_cast<float*>(sums), x86::sum16_lanes<true>(reinterpret_cast<const __m512*>(acc)));
}

// The value rows are walked column strip by column strip in the accumulation, which the hardware
// prefetcher does not follow: the score pass requests each value row's first kLeadLines cache
// lines, and the strips of line c request line c + kLeadLines (the f32 kernel's split,
// attention_kernels.cpp). One line (64 values) ahead beat two, and none at all was slower still.
constexpr int64_t kLeadLines = 1;

// The order in which a tile's positions are scored: from head dim kAttendStreamMinHeadDim,
// kAttendKeyStreams interleaved runs (quarters of the tile, each in order), then the last
// n mod kAttendKeyStreams positions, so the key rows are read as four sequential streams rather
// than one (as the f32 kernel, attention_kernels.cpp); at hd 256 that was slower, so shorter
// rows stay in order. Every score is the same exact sum in whatever order or block it is computed.
void stream_order(int64_t n, int64_t hd, std::vector<int32_t>& order) {
  order.clear();
  const int64_t run = hd >= kAttendStreamMinHeadDim ? n / kAttendKeyStreams : 0;
  for (int64_t s = 0; s < run; ++s)
    for (int64_t j = 0; j < kAttendKeyStreams; ++j) order.push_back(int32_t(j * run + s));
  for (int64_t s = kAttendKeyStreams * run; s < n; ++s) order.push_back(int32_t(s));
}

// Scores of R rows against n positions, scored in blocks of P = 16 / R consecutive entries of
// the rows' order (krow, kscale, vrow listed in that order, padded with zero rows to a whole
// block); at[i] is the tile column of entry i:
// sc[r * kTile + at[i]] = (scale_q[r] · scale_k[i]) · (sum - 128 · Σ q8[r]).
template <int R>
G4_TARGET_AVX512F_BW_VL_VNNI void score_rows(const int8_t* q8, int64_t qs, const float* qscale, const int32_t* qcorr,
                                             int64_t hd, const int8_t* const* krow, const float* const* kscale,
                                             const int8_t* const* vrow, const int32_t* at, int64_t n, float* sc,
                                             bool prefetch) {
  constexpr int P = 16 / R;
  alignas(64) int32_t sums[16];
  for (int64_t s = 0; s < n; s += P) {
    if (prefetch)
      for (int64_t p = s; p < std::min(n, s + P); ++p)
        for (int64_t line = 0; line < kLeadLines && line * 64 < hd; ++line)
          _mm_prefetch(reinterpret_cast<const char*>(vrow[p] + line * 64), _MM_HINT_T1);
    score_block<R>(q8, qs, hd, krow + s, sums);
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P && s + p < n; ++p)
        sc[r * kTile + at[s + p]] = float(sums[r * P + p] - qcorr[r]) * (qscale[r] * *kscale[s + p]);
  }
}

// o[r][c, c + 32) += Σ_s w[r][s] · v_s[c, c + 32) for R heads over n positions, the 2R sums held
// in registers; int8 values widened to f32, one FMA per (head, 16 columns, position), positions
// in order. kFull: all 32 columns exist (no masks).
template <int R, bool kFull>
G4_TARGET_AVX512F_BW_VL_VNNI void accumulate_block(const float* w, int64_t hd, const int8_t* const* vrow, int64_t n,
                                                   int64_t c, float* o, bool prefetch) {
  const __mmask16 m0 = mask16(hd - c), m1 = mask16(hd - c - 16);
  __m512 lo[R], hi[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    lo[r] = _mm512_maskz_loadu_ps(m0, o + r * hd + c);
    hi[r] = _mm512_maskz_loadu_ps(m1, o + r * hd + c + 16);
  }
  for (int64_t s = 0; s < n; ++s) {
    const int8_t* v = vrow[s] + c;
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(v + kLeadLines * 64), _MM_HINT_T1);
    __m128i b0, b1;
    if constexpr (kFull) {
      b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v));
      b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + 16));
    } else {
      b0 = _mm_maskz_loadu_epi8(m0, v);
      b1 = _mm_maskz_loadu_epi8(m1, v + 16);
    }
    const __m512 x0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b0)), x1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b1));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wr = _mm512_set1_ps(w[r * kTile + s]);
      lo[r] = _mm512_fmadd_ps(wr, x0, lo[r]);
      hi[r] = _mm512_fmadd_ps(wr, x1, hi[r]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(o + r * hd + c, m0, lo[r]);
    _mm512_mask_storeu_ps(o + r * hd + c + 16, m1, hi[r]);
  }
}

template <int R>
G4_TARGET_AVX512F_BW_VL_VNNI void accumulate_strip(const float* w, int64_t hd, const int8_t* const* vrow, int64_t n,
                                                   int64_t c, float* o, bool prefetch) {
  if (c + 32 <= hd) accumulate_block<R, true>(w, hd, vrow, n, c, o, prefetch);
  else accumulate_block<R, false>(w, hd, vrow, n, c, o, false);
}

G4_TARGET_AVX512F_BW_VL_VNNI void accumulate(const float* w, int64_t G, int64_t hd, const int8_t* const* vrow,
                                             int64_t n, float* o) {
  for (int64_t c = 0; c < hd; c += 32) {
    // Once per cache line of the rows, from the first block of heads, and only within the row.
    const bool pf = c % 64 == 0 && c + kLeadLines * 64 < hd;
    int64_t g = 0;
    for (; g + 8 <= G; g += 8) accumulate_strip<8>(w + g * kTile, hd, vrow, n, c, o + g * hd, pf && g == 0);
    for (; g + 4 <= G; g += 4) accumulate_strip<4>(w + g * kTile, hd, vrow, n, c, o + g * hd, pf && g == 0);
    for (; g + 2 <= G; g += 2) accumulate_strip<2>(w + g * kTile, hd, vrow, n, c, o + g * hd, pf && g == 0);
    for (; g < G; ++g) accumulate_strip<1>(w + g * kTile, hd, vrow, n, c, o + g * hd, pf && g == 0);
  }
}

struct Scratch {
  std::vector<int8_t> q8, zero;
  std::vector<float> qscale, sc;
  std::vector<int32_t> qcorr;
  std::vector<const int8_t*> krow, vrow;
  std::vector<const float*> kscale, vscale;
  std::vector<int32_t> order;                // a tile's positions in scoring order (stream_order)
  std::vector<const int8_t*> kord, vord;     // [kTile + kPadRows] rows in that order
  std::vector<const float*> ksord;           // their key scales
};

// The K and V rows and scales of positions [begin, end) of kv head kv_head, found through the
// spans one by one, into s.krow, s.vrow, s.kscale, s.vscale.
void gather_rows(const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end, Scratch& s) {
  const int64_t count = end - begin, hd = kv.hd;
  for (auto* v : {&s.krow, &s.vrow}) v->resize(size_t(count));
  for (auto* v : {&s.kscale, &s.vscale}) v->resize(size_t(count));
  size_t si = 0;     // span holding position p
  int64_t base = 0;  // its first position
  for (int64_t p = begin; p < end; ++p) {
    while (base + kv.spans[si].n <= p) base += kv.spans[si++].n;
    const KvSpan& sp = kv.spans[si];
    const int64_t row = (p - base) * kv.kvh + kv_head;
    const size_t j = size_t(p - begin);
    s.krow[j] = static_cast<const int8_t*>(sp.k) + row * hd;
    s.vrow[j] = static_cast<const int8_t*>(sp.v) + row * hd;
    s.kscale[j] = sp.k_scale + row;
    s.vscale[j] = sp.v_scale + row;
  }
}

G4_TARGET_AVX512F_BW_VL_VNNI void attend_int8(const float* q, int64_t G, const KvSpans& kv, int64_t kv_head,
                                              int64_t begin, int64_t end, float* o, float* m, float* l) {
  const int64_t hd = kv.hd;
  thread_local Scratch s;
  // Quantized query rows on cache lines, zero past hd up to a whole number of 64-byte vectors.
  size_t qs = 0;
  int8_t* q8 = aligned_rows(s.q8, size_t(G), size_t(hd), qs);
  s.qscale.resize(size_t(G));
  s.qcorr.resize(size_t(G));
  for (int64_t g = 0; g < G; ++g) {
    int8_t* row = q8 + size_t(g) * qs;
    s.qscale[size_t(g)] = quantize_int8_symmetric(q + g * hd, hd, row);
    std::fill(row + hd, row + qs, int8_t(0));
    int32_t sum = 0;
    for (int64_t i = 0; i < hd; ++i) sum += row[i];
    s.qcorr[size_t(g)] = 128 * sum;
  }
  if (s.zero.size() < size_t(hd)) s.zero.assign(size_t(hd), 0);  // never written: stays zero
  s.sc.resize(size_t(G * kTile));
  std::fill(o, o + G * hd, 0.0f);
  std::fill(m, m + G, -std::numeric_limits<float>::infinity());
  std::fill(l, l + G, 0.0f);
  // Every position's rows and scales (the tiles' scoring order below pads its blocks with zero rows).
  gather_rows(kv, kv_head, begin, end, s);
  static const float kZeroScale = 0.0f;
  float* sc = s.sc.data();
  for (auto* v : {&s.kord, &s.vord}) v->assign(size_t(kTile + kPadRows), s.zero.data());
  s.ksord.assign(size_t(kTile + kPadRows), &kZeroScale);
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t n = std::min(end, t0 + kTile) - t0;
    const size_t at = size_t(t0 - begin);
    const int8_t* const* vrow = s.vrow.data() + at;
    const float* const* vscale = s.vscale.data() + at;
    stream_order(n, hd, s.order);
    for (size_t i = 0; i < size_t(n); ++i) {
      const size_t p = at + size_t(s.order[i]);
      s.kord[i] = s.krow[p];
      s.vord[i] = s.vrow[p];
      s.ksord[i] = s.kscale[p];
    }
    for (size_t i = size_t(n); i < size_t(kTile); ++i) {  // a short last tile: zero rows after it
      s.kord[i] = s.vord[i] = s.zero.data();
      s.ksord[i] = &kZeroScale;
    }
    const int8_t* const* krow = s.kord.data();
    const int8_t* const* vpre = s.vord.data();
    const float* const* kscale = s.ksord.data();
    const int32_t* order = s.order.data();
    int64_t g = 0;
    const float* qscale = s.qscale.data();
    const int32_t* qcorr = s.qcorr.data();
    for (; g + 8 <= G; g += 8)
      score_rows<8>(q8 + g * qs, qs, qscale + g, qcorr + g, hd, krow, kscale, vpre, order, n, sc + g * kTile, g == 0);
    for (; g + 4 <= G; g += 4)
      score_rows<4>(q8 + g * qs, qs, qscale + g, qcorr + g, hd, krow, kscale, vpre, order, n, sc + g * kTile, g == 0);
    for (; g + 2 <= G; g += 2)
      score_rows<2>(q8 + g * qs, qs, qscale + g, qcorr + g, hd, krow, kscale, vpre, order, n, sc + g * kTile, g == 0);
    for (; g < G; ++g)
      score_rows<1>(q8 + g * qs, qs, qscale + g, qcorr + g, hd, krow, kscale, vpre, order, n, sc + g * kTile, g == 0);
    softmax_tile(sc, G, n, hd, o, m, l);
    // The value scales folded into the weights (after the softmax summed them into l).
    for (int64_t h = 0; h < G; ++h)
      for (int64_t j = 0; j < n; ++j) sc[h * kTile + j] *= *vscale[j];
    accumulate(sc, G, hd, vrow, n, o);
  }
}

}  // namespace

bool attention_int8_available() { return gemm_q8_avx512(); }

void attend_partial_int8(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                         float* o, float* m, float* l) {
  if (!attention_int8_available())
    throw Error("attention: the int8 kernel needs AVX512_VNNI confirmed by the probe and its self-test");
  check_attend_args(group, kv, kv_head, begin, end);
  if (kv.hd > kMaxHeadDim)
    throw Error("attention: the int8 kernel takes head dims up to " + std::to_string(kMaxHeadDim) + ", got " +
                std::to_string(kv.hd));
  for (size_t i = 0; i < kv.count; ++i)
    if (kv.spans[i].elem != KvElem::I8)
      throw Error("attention: the int8 kernel reads int8 K/V only; span " + std::to_string(i) + " holds another type");
  attend_int8(q, group, kv, kv_head, begin, end, o, m, l);
}

#else

bool attention_int8_available() { return false; }
void attend_partial_int8(const float*, int64_t, const KvSpans&, int64_t, int64_t, int64_t, float*, float*, float*) {
  (void)kMaxHeadDim;
  throw Error("attention: the int8 kernel is not built for this architecture");
}

#endif

}  // namespace g4::ops
