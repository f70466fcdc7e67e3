#include "ops/attention/attention_bf16.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/matmul/gemm_bf16.h"
#include "platform/aligned_rows.h"
#include "platform/error.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"

#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

void find_bf16_rows(const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end, const uint16_t** krow,
                    const uint16_t** vrow) {
  size_t si = 0;     // span holding position p
  int64_t base = 0;  // its first position
  for (int64_t p = begin; p < end; ++p) {
    while (base + kv.spans[si].n <= p) base += kv.spans[si++].n;
    const KvSpan& sp = kv.spans[si];
    const int64_t off = ((p - base) * kv.kvh + kv_head) * kv.hd;
    krow[p - begin] = static_cast<const uint16_t*>(sp.k) + off;
    vrow[p - begin] = static_cast<const uint16_t*>(sp.v) + off;
  }
}

#if defined(__x86_64__)
namespace {

constexpr int64_t kTile = kAttendTile;
constexpr int64_t kPadRows = 16;         // score blocks take up to 16 positions; the pad rows are zero
constexpr int64_t kPStride = kTile + 2;  // bf16 weights per head row, room for the odd tile's zero pair

inline __mmask32 mask32(int64_t count) { return count >= 32 ? ~__mmask32(0) : __mmask32((uint64_t(1) << count) - 1); }

// Scores of R query rows (bf16, [R, hd]) against P = 16 / R key rows: 16 sums, each over pairs
// of elements in order, then reduced by one shuffle tree (x86::sum16_lanes). sc[r * kTile + p]
// for the block's positions.
template <int R>
G4_TARGET_AVX512F_BW_VL_DQ_BF16 void score_block(const uint16_t* qb, int64_t hd, const uint16_t* const* krow,
                                                 float* sc) {
  constexpr int P = 16 / R;
  __m512 acc[16];
  #pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < hd; i += 32) {
    const __mmask32 mk = mask32(hd - i);  // zero-filled tail: the missing pairs add 0·0
    __m512i kv[P];
    #pragma GCC unroll 16
    for (int p = 0; p < P; ++p) kv[p] = _mm512_maskz_loadu_epi16(mk, krow[p] + i);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i qv = _mm512_maskz_loadu_epi16(mk, qb + r * hd + i);
      #pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[r * P + p] = _mm512_dpbf16_ps(acc[r * P + p], (__m512bh)qv, (__m512bh)kv[p]);
    }
  }
  alignas(64) float s[16];
  _mm512_store_ps(s, x86::sum16_lanes<false>(acc));
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) sc[r * kTile + p] = s[r * P + p];
}

// Software prefetch: a decode step's keys and values come from memory (35 layers' caches do not
// stay in cache), and the kernel does enough arithmetic per line that out-of-order execution
// alone keeps few lines in flight. While scoring position s, the key row kAheadRows positions on
// and the value row of s (read again after the softmax) are requested; both are needed, and
// every line of each row. The requests in flight per core then limit the kernel, and they all
// fall in the scoring half of each tile, so the accumulation also requests the next tile's key
// rows (NextKeyLines below). The variants measured and their figures: docs/perf.md.
constexpr int64_t kAheadRows = 8;

inline void prefetch_row(const uint16_t* row, int64_t hd) {
  for (int64_t i = 0; i < hd; i += 32) _mm_prefetch(reinterpret_cast<const char*>(row + i), _MM_HINT_T0);
}

// The next tile's key rows, one 64-byte line per step, row after row (the order scoring reads
// them). Two steps per (pair of positions, 32 columns) of the accumulation cover a full tile's
// rows x hd/32 lines exactly.
struct NextKeyLines {
  const uint16_t* const* rows;  // [count] the next tile's key rows
  int64_t count, lines_per_row;
  int64_t row = 0, line = 0;
  void step() {
    if (row >= count) return;
    _mm_prefetch(reinterpret_cast<const char*>(rows[row] + line * 32), _MM_HINT_T0);
    if (++line == lines_per_row) line = 0, ++row;
  }
};

// One block of R rows against n positions (padded up to a multiple of 16 / R with zero rows);
// the first block of rows also issues the prefetches.
template <int R>
G4_TARGET_AVX512F_BW_VL_DQ_BF16 void score_rows(const uint16_t* qb, int64_t hd, const uint16_t* const* krow,
                                                const uint16_t* const* vrow, int64_t n, float* sc, bool prefetch) {
  constexpr int P = 16 / R;
  for (int64_t s = 0; s < n; s += P) {
    if (prefetch)
      for (int64_t p = s; p < s + P; ++p) {
        prefetch_row(krow[p + kAheadRows], hd);
        prefetch_row(vrow[p], hd);  // into L1 (measured faster than an L2 hint)
      }
    score_block<R>(qb, hd, krow + s, sc + s);
  }
}

// Scores of G rows against n positions. krow and vrow hold at least n + kAheadRows + 16 rows
// (zero rows beyond the range).
G4_TARGET_AVX512F_BW_VL_DQ_BF16 void scores(const uint16_t* qb, int64_t G, int64_t hd, const uint16_t* const* krow,
                                            const uint16_t* const* vrow, int64_t n, float* sc) {
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) score_rows<8>(qb + g * hd, hd, krow, vrow, n, sc + g * kTile, g == 0);
  for (; g + 4 <= G; g += 4) score_rows<4>(qb + g * hd, hd, krow, vrow, n, sc + g * kTile, g == 0);
  for (; g + 2 <= G; g += 2) score_rows<2>(qb + g * hd, hd, krow, vrow, n, sc + g * kTile, g == 0);
  for (; g < G; ++g) score_rows<1>(qb + g * hd, hd, krow, vrow, n, sc + g * kTile, g == 0);
}

// o[r][c, c + 32) += Σ_j p[r][j] · v_j[c, c + 32) for R heads over `pairs` pairs of positions:
// one VDPBF16PS per (head, 16 columns, pair), the value rows of positions 2j and 2j + 1
// interleaved element by element (unpacklo/hi), the two weights broadcast as one 32-bit pair.
// The accumulators hold columns in that interleaved order: lo = {0-3, 8-11, 16-19, 24-27},
// hi = {4-7, 12-15, 20-23, 28-31}; o is permuted into it on load and back on store.
template <int R>
G4_TARGET_AVX512F_BW_VL_DQ_BF16 void accumulate_block(const uint16_t* pb, int64_t hd, const uint16_t* const* vrow,
                                                      int64_t pairs, int64_t c, float* o, NextKeyLines* next) {
  const __mmask32 mv = mask32(hd - c);
  const __mmask16 m0 = __mmask16(mv), m1 = __mmask16(mv >> 16);
  __m512 lo[R], hi[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 n0 = _mm512_maskz_loadu_ps(m0, o + r * hd + c), n1 = _mm512_maskz_loadu_ps(m1, o + r * hd + c + 16);
    lo[r] = _mm512_shuffle_f32x4(n0, n1, _MM_SHUFFLE(2, 0, 2, 0));
    hi[r] = _mm512_shuffle_f32x4(n0, n1, _MM_SHUFFLE(3, 1, 3, 1));
  }
  for (int64_t j = 0; j < pairs; ++j) {
    if (next) next->step(), next->step();
    const __m512i a = _mm512_maskz_loadu_epi16(mv, vrow[2 * j] + c), b = _mm512_maskz_loadu_epi16(mv, vrow[2 * j + 1] + c);
    const __m512i vlo = _mm512_unpacklo_epi16(a, b), vhi = _mm512_unpackhi_epi16(a, b);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint32_t pair;
      std::memcpy(&pair, pb + r * kPStride + 2 * j, 4);  // p[2j] low, p[2j + 1] high, as vlo/vhi
      const __m512i p2 = _mm512_set1_epi32(int(pair));
      lo[r] = _mm512_dpbf16_ps(lo[r], (__m512bh)vlo, (__m512bh)p2);
      hi[r] = _mm512_dpbf16_ps(hi[r], (__m512bh)vhi, (__m512bh)p2);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 t0 = _mm512_shuffle_f32x4(lo[r], hi[r], _MM_SHUFFLE(1, 0, 1, 0));  // lo.l0 lo.l1 hi.l0 hi.l1
    const __m512 t1 = _mm512_shuffle_f32x4(lo[r], hi[r], _MM_SHUFFLE(3, 2, 3, 2));  // lo.l2 lo.l3 hi.l2 hi.l3
    _mm512_mask_storeu_ps(o + r * hd + c, m0, _mm512_shuffle_f32x4(t0, t0, _MM_SHUFFLE(3, 1, 2, 0)));
    _mm512_mask_storeu_ps(o + r * hd + c + 16, m1, _mm512_shuffle_f32x4(t1, t1, _MM_SHUFFLE(3, 1, 2, 0)));
  }
}

G4_TARGET_AVX512F_BW_VL_DQ_BF16 void accumulate(const uint16_t* pb, int64_t G, int64_t hd, const uint16_t* const* vrow,
                                                int64_t n, float* o, NextKeyLines* next) {
  const int64_t pairs = (n + 1) / 2;
  for (int64_t c = 0; c < hd; c += 32) {
    int64_t g = 0;
    for (; g + 8 <= G; g += 8) accumulate_block<8>(pb + g * kPStride, hd, vrow, pairs, c, o + g * hd, g == 0 ? next : nullptr);
    for (; g + 4 <= G; g += 4) accumulate_block<4>(pb + g * kPStride, hd, vrow, pairs, c, o + g * hd, g == 0 ? next : nullptr);
    for (; g + 2 <= G; g += 2) accumulate_block<2>(pb + g * kPStride, hd, vrow, pairs, c, o + g * hd, g == 0 ? next : nullptr);
    for (; g < G; ++g) accumulate_block<1>(pb + g * kPStride, hd, vrow, pairs, c, o + g * hd, g == 0 ? next : nullptr);
  }
}

// pb[j] = the upper 16 bits of e[j] for j < n, 16 at a time; pb[n] = 0 (an odd tile's last pair:
// weight 0 on the zero row).
G4_TARGET_AVX512F_BW_VL_DQ_BF16 void top_halves(const float* e, int64_t n, uint16_t* pb) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, e + j)), 16);
    _mm256_mask_storeu_epi16(pb + j, m, _mm512_cvtepi32_epi16(bits));
  }
  pb[n] = 0;
}

struct Scratch {
  std::vector<uint16_t> qb, pb, zero;
  std::vector<float> sc;
  std::vector<const uint16_t*> krow, vrow;
};

G4_TARGET_AVX512F_BW_VL_DQ_BF16 void attend_bf16(const float* q, int64_t G, const KvSpans& kv, int64_t kv_head,
                                                 int64_t begin, int64_t end, float* o, float* m, float* l) {
  const int64_t hd = kv.hd;
  thread_local Scratch s;
  // The rounded query rows ([G, hd], contiguous) start on a cache line, as in the f32 kernel.
  size_t qb_stride = 0;
  uint16_t* qb = aligned_rows(s.qb, 1, size_t(G * hd), qb_stride);
  s.pb.assign(size_t(G * kPStride), 0);
  s.zero.assign(size_t(hd), 0);
  s.sc.resize(size_t(G * kTile));
  round_rows_to_bf16(q, G * hd, qb);
  std::fill(o, o + G * hd, 0.0f);
  std::fill(m, m + G, -std::numeric_limits<float>::infinity());
  std::fill(l, l + G, 0.0f);
  // Every position's rows, found through the spans one by one; zero rows pad the end.
  const int64_t count = end - begin;
  s.krow.resize(size_t(count + kPadRows + kAheadRows));
  s.vrow.resize(size_t(count + kPadRows + kAheadRows));
  find_bf16_rows(kv, kv_head, begin, end, s.krow.data(), s.vrow.data());
  for (size_t j = size_t(count); j < s.krow.size(); ++j) s.krow[j] = s.vrow[j] = s.zero.data();
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t n = std::min(end, t0 + kTile) - t0;
    const uint16_t* const* krow = s.krow.data() + (t0 - begin);
    const uint16_t* const* vrow = s.vrow.data() + (t0 - begin);
    scores(qb, G, hd, krow, vrow, n, s.sc.data());
    softmax_tile_bf16(s.sc.data(), G, n, hd, o, m, l);
    // The weights are bf16 values already (softmax_tile_bf16 rounded them): keep their top half.
    for (int64_t g = 0; g < G; ++g) top_halves(s.sc.data() + g * kTile, n, s.pb.data() + g * kPStride);
    // Only a full tile has a next one; its 2 * pairs * hd/32 steps cover the next tile's lines.
    const int64_t next_count = std::max<int64_t>(0, std::min(end, t0 + 2 * kTile) - (t0 + kTile));
    NextKeyLines next{next_count > 0 ? krow + kTile : nullptr, next_count, (hd + 31) / 32};
    accumulate(s.pb.data(), G, hd, vrow, n, o, &next);
  }
}

}  // namespace

bool attention_bf16_available() { return gemm_bf16_available(); }

void attend_partial_bf16(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                         float* o, float* m, float* l) {
  if (!attention_bf16_available())
    throw Error("attention: the bf16 kernel needs AVX512_BF16 confirmed by the probe and its self-test");
  check_attend_args(group, kv, kv_head, begin, end);
  for (size_t i = 0; i < kv.count; ++i)
    if (kv.spans[i].elem != KvElem::BF16)
      throw Error("attention: the bf16 kernel reads bf16 K/V only; span " + std::to_string(i) + " holds another type");
  attend_bf16(q, group, kv, kv_head, begin, end, o, m, l);
}

#else

bool attention_bf16_available() { return false; }
void attend_partial_bf16(const float*, int64_t, const KvSpans&, int64_t, int64_t, int64_t, float*, float*, float*) {
  throw Error("attention: the bf16 kernel is not built for this architecture");
}

#endif

}  // namespace g4::ops
