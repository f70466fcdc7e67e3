// Highway multi-target compilation: this file is re-included once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention/attention_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/attention/attention_kernels.h"
#include "ops/isa/widen-inl.h"
#include "platform/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace g4::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Positions per softmax tile; a multiple of every x86 vector width in floats.
constexpr int64_t kTile = kAttendTile;

// The value rows' memory traffic, split between the two passes over a tile. The score pass
// requests the first kValueStripsAhead strips (2 vectors wide: AccumulateHeads' column strips) of
// each value row while it streams the keys; the accumulation, walking strip j over the tile's
// positions, requests strip j + kValueStripsAhead of the same rows. Requesting whole value rows in
// the score pass put all of a tile's reads in that pass and none in the other, so the memory sat
// idle for half of the kernel's time.
constexpr int64_t kValueStripsAhead = 2;

// sc[r * kTile + p · apart] = q_r · k_{p · apart} for ROWS query rows and NPOS positions `apart`
// positions apart (k_j = k + j·stride): each k load serves ROWS rows, each q load NPOS positions
// (ROWS · NPOS independent sums). q: [ROWS, qs], rows qs >= hd floats apart (attend_partial
// copies them onto cache lines).
template <int ROWS, int NPOS, typename T>
HWY_INLINE void ScoreBlock(const float* q, int64_t qs, int64_t hd, const T* k, int64_t stride, int64_t apart,
                           float* sc) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  hn::Vec<decltype(d)> acc[ROWS * NPOS];
  #pragma GCC unroll 16
  for (int j = 0; j < ROWS * NPOS; ++j) acc[j] = hn::Zero(d);
  int64_t i = 0;
  for (; i + N <= hd; i += N) {
    hn::Vec<decltype(d)> kv[NPOS];
    #pragma GCC unroll 2
    for (int p = 0; p < NPOS; ++p) kv[p] = LoadWidened(d, k + p * apart * stride + i);
    #pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      auto qv = hn::LoadU(d, q + r * qs + i);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      // Held in a register for its NPOS uses (32 zmm registers hold it with the 16 sums): GCC
      // otherwise folds the load into every FMA, and those indexed loads, unlaminated, halve
      // how far ahead of the key loads the core can run.
      if constexpr (NPOS > 1) asm("" : "+v"(qv.raw));
#endif
      #pragma GCC unroll 2
      for (int p = 0; p < NPOS; ++p) acc[r * NPOS + p] = hn::MulAdd(qv, kv[p], acc[r * NPOS + p]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int p = 0; p < NPOS; ++p) {
      float s = hn::GetLane(hn::SumOfLanes(d, acc[r * NPOS + p]));
      for (int64_t t = i; t < hd; ++t) s += q[r * qs + t] * ScalarF(k[p * apart * stride + t]);
      sc[r * kTile + p * apart] = s;
    }
}

// Query rows in blocks of 8 (one widening of each key serves 8 heads, E2B's GQA group); every
// (row, position) sum is the same arithmetic whatever block it falls in.
template <int NPOS, typename T>
HWY_INLINE void ScoreRows(const float* q, int64_t qs, int64_t G, int64_t hd, const T* k, int64_t stride, int64_t apart,
                          float* sc) {
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) ScoreBlock<8, NPOS>(q + g * qs, qs, hd, k, stride, apart, sc + g * kTile);
  for (; g + 4 <= G; g += 4) ScoreBlock<4, NPOS>(q + g * qs, qs, hd, k, stride, apart, sc + g * kTile);
  switch (G - g) {
    case 3: ScoreBlock<3, NPOS>(q + g * qs, qs, hd, k, stride, apart, sc + g * kTile); break;
    case 2: ScoreBlock<2, NPOS>(q + g * qs, qs, hd, k, stride, apart, sc + g * kTile); break;
    case 1: ScoreBlock<1, NPOS>(q + g * qs, qs, hd, k, stride, apart, sc + g * kTile); break;
    default: break;
  }
}

// Elements of a value row between the strip being accumulated and the one requested for later.
HWY_INLINE int64_t ValueLead() {
  const hn::ScalableTag<float> d;
  return kValueStripsAhead * 2 * int64_t(hn::Lanes(d));
}

// Requests the cache lines of p[0, n) into L2.
template <typename T>
HWY_INLINE void PrefetchElems(const T* p, int64_t n) {
  constexpr int64_t kPerLine = 64 / int64_t(sizeof(T));
  for (int64_t i = 0; i < n; i += kPerLine) __builtin_prefetch(p + i, 0, 2);
}

// Requests the first kValueStripsAhead strips of rows [s, s + count) of v (`stride` apart) into L2.
template <typename T>
HWY_INLINE void PrefetchRows(const T* v, int64_t stride, int64_t hd, int64_t s, int64_t count) {
  const int64_t lead = std::min(hd, ValueLead());
  for (int64_t r = s; r < s + count; ++r) PrefetchElems(v + r * stride, lead);
}

// Scores of G query rows against n (<= kTile) keys k_s = k + s·stride, times ks[s·ks_stride]
// when ks is set (int8). From head dim kStreamMinHeadDim the keys are read as kKeyStreams
// interleaved runs (quarters of the positions, each in order), not front to back: four
// sequential streams keep more of the key rows in flight from memory than one (2, 8 or 16 did
// less). At hd 256 the gain was noise or worse, so shorter rows stay in order. Every score is
// the same sum whichever block computes it. While
// scoring position s, the first strips of the value row of s (v) are requested, the rest during
// the accumulation (kValueStripsAhead): the accumulation walks the values column strip by column
// strip, which the hardware prefetcher does not follow.
constexpr int64_t kKeyStreams = kAttendKeyStreams, kStreamMinHeadDim = kAttendStreamMinHeadDim;

template <typename T>
void Scores(const float* q, int64_t qs, int64_t G, int64_t hd, const T* k, int64_t stride, const float* ks,
            int64_t ks_stride, int64_t n, float* sc, const T* v) {
  static_assert(kKeyStreams % 2 == 0, "streams are scored in pairs");
  const int64_t run = hd >= kStreamMinHeadDim ? n / kKeyStreams : 0, half = kKeyStreams / 2;
  for (int64_t s = 0; s < run; ++s) {
    for (int64_t j = 0; j < kKeyStreams; ++j) PrefetchRows(v, stride, hd, s + j * run, 1);
    for (int64_t j = 0; j < half; ++j)  // streams j and j + half
      ScoreRows<2>(q, qs, G, hd, k + (s + j * run) * stride, stride, half * run, sc + s + j * run);
  }
  int64_t s = kKeyStreams * run;  // the last n mod kKeyStreams positions in order
  for (; s + 2 <= n; s += 2) {
    PrefetchRows(v, stride, hd, s, 2);
    ScoreRows<2>(q, qs, G, hd, k + s * stride, stride, 1, sc + s);
  }
  if (s < n) {
    PrefetchRows(v, stride, hd, s, 1);
    ScoreRows<1>(q, qs, G, hd, k + s * stride, stride, 1, sc + s);
  }
  if (ks)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t j = 0; j < n; ++j) sc[g * kTile + j] *= ks[j * ks_stride];
}

// Softmax weights below e^-44 (~2^-63.5, relative to the largest, which is 1) are taken as 0.
// Why: a peaked softmax (Gemma 4 scales scores by 1, and hd 512 spreads them widely) leaves
// most weights subnormal, and on Intel cores every FMA that meets a subnormal input or result
// takes a microcode assist, which left attention at hd 512 far below its FMA rate. Such a
// weight is 2^-40 below the f32 rounding of a sum that is >= 1, so dropping it
// changes nothing a result can show; VDPBF16PS treats subnormal weights as 0 in any case.
constexpr float kMinWeightExponent = kAttendMinWeightExponent;

// Online softmax step for one tile: turns sc[g] into e^(s - m_new) (padded to whole vectors
// with zeros), rescales the running o, l by e^(m_old - m_new), adds the tile's sum to l.
// kRoundBf16: each e is rounded to the nearest bf16 (ties to even) before it is stored and
// summed, so the weights the bf16 kernel multiplies by are exactly the ones l adds up.
template <bool kRoundBf16>
void SoftmaxTileImpl(float* sc, int64_t G, int64_t n, int64_t hd, float* o, float* m, float* l) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const int64_t n_pad = (n + N - 1) / N * N;
  for (int64_t g = 0; g < G; ++g) {
    float* sg = sc + g * kTile;
    for (int64_t j = n; j < n_pad; ++j) sg[j] = -std::numeric_limits<float>::infinity();  // Exp gives 0
    // The tile's maximum in vectors (a scalar max is one 4-cycle dependency per score).
    auto vmax = hn::Set(d, -std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < n_pad; j += N) vmax = hn::Max(vmax, hn::LoadU(d, sg + j));
    const float mt = hn::GetLane(hn::MaxOfLanes(d, vmax));
    if (mt > m[g]) {
      // 0 for the first tile (m = -inf), and below kMinWeightExponent (see there).
      const float corr = m[g] - mt >= kMinWeightExponent ? std::exp(m[g] - mt) : 0.0f;
      l[g] *= corr;
      float* og = o + g * hd;
      const auto vc = hn::Set(d, corr);
      int64_t t = 0;
      for (; t + N <= hd; t += N) hn::StoreU(hn::Mul(hn::LoadU(d, og + t), vc), d, og + t);
      for (; t < hd; ++t) og[t] *= corr;
      m[g] = mt;
    }
    const auto vm = hn::Set(d, m[g]), floor = hn::Set(d, kMinWeightExponent);
    auto sum = hn::Zero(d);
    for (int64_t j = 0; j < n_pad; j += N) {
      const auto x = hn::Sub(hn::LoadU(d, sg + j), vm);
      // Exp of the clamped argument: Exp(x) for x far below the floor forms subnormal
      // intermediates (its 2^k scaling), each a microcode assist on Intel even in lanes the
      // mask then zeroes.
      auto e = hn::IfThenElseZero(hn::Ge(x, floor), hn::Exp(d, hn::Max(x, floor)));
      if constexpr (kRoundBf16) {  // e is finite and >= 0: add half an ulp of bf16 (ties to even), truncate
        const hn::RebindToUnsigned<decltype(d)> du;
        const auto bits = hn::BitCast(du, e);
        const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
        const auto up = hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), odd));
        e = hn::BitCast(d, hn::And(up, hn::Set(du, 0xffff0000u)));
      }
      hn::StoreU(e, d, sg + j);
      sum = hn::Add(sum, e);
    }
    l[g] += hn::GetLane(hn::SumOfLanes(d, sum));
  }
}

void SoftmaxTile(float* sc, int64_t G, int64_t n, int64_t hd, float* o, float* m, float* l) {
  SoftmaxTileImpl<false>(sc, G, n, hd, o, m, l);
}
void SoftmaxTileBf16(float* sc, int64_t G, int64_t n, int64_t hd, float* o, float* m, float* l) {
  SoftmaxTileImpl<true>(sc, G, n, hd, o, m, l);
}

// o[g][i, i + C·N) += Σ_s w[g][s] · v_s[i, i + C·N) for GN heads, the GN·C accumulators held
// in registers across all n positions: each v load serves GN heads and o is loaded and stored
// once per pass. Every element is summed in position order, one FMA per position. pf (may be
// null): the strip to request into L2 for a later pass, pf + s·stride beside v_s.
template <int GN, int C, typename T>
HWY_INLINE void AccumulateBlock(const float* w, int64_t hd, const T* v, int64_t stride, int64_t n, float* o,
                                const T* pf) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  // Fully unrolled so the accumulators live in registers (GCC keeps a looped array in memory).
  hn::Vec<decltype(d)> acc[GN * C];
  #pragma GCC unroll 16
  for (int j = 0; j < GN * C; ++j) acc[j] = hn::LoadU(d, o + (j / C) * hd + (j % C) * N);
  for (int64_t s = 0; s < n; ++s) {
    if (pf) PrefetchElems(pf + s * stride, C * N);
    hn::Vec<decltype(d)> x[C];
    #pragma GCC unroll 2
    for (int c = 0; c < C; ++c) x[c] = LoadWidened(d, v + s * stride + c * N);
    #pragma GCC unroll 8
    for (int g = 0; g < GN; ++g) {
      const auto wg = hn::Set(d, w[g * kTile + s]);
      #pragma GCC unroll 2
      for (int c = 0; c < C; ++c) acc[g * C + c] = hn::MulAdd(wg, x[c], acc[g * C + c]);
    }
  }
  #pragma GCC unroll 16
  for (int j = 0; j < GN * C; ++j) hn::StoreU(acc[j], d, o + (j / C) * hd + (j % C) * N);
}

template <int GN, typename T>
HWY_INLINE void AccumulateHeads(const float* w, int64_t hd, const T* v, int64_t stride, int64_t n, float* o) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  const int64_t ahead = ValueLead();
  for (; i + 2 * N <= hd; i += 2 * N)
    AccumulateBlock<GN, 2>(w, hd, v + i, stride, n, o + i, i + ahead < hd ? v + i + ahead : nullptr);
  for (; i + N <= hd; i += N) AccumulateBlock<GN, 1>(w, hd, v + i, stride, n, o + i, static_cast<const T*>(nullptr));
  for (; i < hd; ++i)  // head dims that are not a multiple of the vector width
    for (int g = 0; g < GN; ++g)
      for (int64_t s = 0; s < n; ++s) o[g * hd + i] += w[g * kTile + s] * ScalarF(v[s * stride + i]);
}

// o[g] += Σ_s p[g][s] · vs_s · v_s for n (<= kTile) values v_s = v + s·stride (vs: int8 scales,
// folded into p in place; p is this tile's own copy). Heads in blocks of up to 8.
template <typename T>
void Accumulate(float* p, int64_t G, int64_t hd, const T* v, int64_t stride, const float* vs, int64_t vs_stride,
                int64_t n, float* o) {
  if (vs)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t s = 0; s < n; ++s) p[g * kTile + s] *= vs[s * vs_stride];
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) AccumulateHeads<8>(p + g * kTile, hd, v, stride, n, o + g * hd);
  const float* pg = p + g * kTile;
  float* og = o + g * hd;
  switch (G - g) {
    case 7: AccumulateHeads<7>(pg, hd, v, stride, n, og); break;
    case 6: AccumulateHeads<6>(pg, hd, v, stride, n, og); break;
    case 5: AccumulateHeads<5>(pg, hd, v, stride, n, og); break;
    case 4: AccumulateHeads<4>(pg, hd, v, stride, n, og); break;
    case 3: AccumulateHeads<3>(pg, hd, v, stride, n, og); break;
    case 2: AccumulateHeads<2>(pg, hd, v, stride, n, og); break;
    case 1: AccumulateHeads<1>(pg, hd, v, stride, n, og); break;
    default: break;
  }
}

// A piece of a tile: n positions of one span starting at position `off` of the span, landing
// at column `col` of the tile's scores.
struct Piece {
  const KvSpan* sp;
  int64_t off, n, col;
};

template <typename T>
void ScorePiece(const float* q, int64_t qs, int64_t G, int64_t hd, int64_t kvh, int64_t kv_head, const Piece& pc,
                float* sc) {
  const T* k = static_cast<const T*>(pc.sp->k) + (pc.off * kvh + kv_head) * hd;
  const T* v = static_cast<const T*>(pc.sp->v) + (pc.off * kvh + kv_head) * hd;
  const float* ks = std::is_same_v<T, int8_t> ? pc.sp->k_scale + pc.off * kvh + kv_head : nullptr;
  Scores(q, qs, G, hd, k, kvh * hd, ks, kvh, pc.n, sc + pc.col, v);
}

template <typename T>
void AccumulatePiece(float* sc, int64_t G, int64_t hd, int64_t kvh, int64_t kv_head, const Piece& pc, float* o) {
  const T* v = static_cast<const T*>(pc.sp->v) + (pc.off * kvh + kv_head) * hd;
  const float* vs = std::is_same_v<T, int8_t> ? pc.sp->v_scale + pc.off * kvh + kv_head : nullptr;
  Accumulate(sc + pc.col, G, hd, v, kvh * hd, vs, kvh, pc.n, o);
}

// Tiles of kTile positions from `begin` (whatever the spans): the result depends only on the
// keys of [begin, end), never on how a cache or a batch laid them out in spans.
// q: [G, qs] (qs >= hd floats per row).
void AttendPartial(const float* q, int64_t qs, int64_t G, const KvSpan* spans, size_t count, int64_t kvh, int64_t hd,
                   int64_t kv_head, int64_t begin, int64_t end, float* o, float* m, float* l, float* scratch) {
  (void)count;  // attend_partial checked [begin, end) against the spans' total
  std::fill(o, o + G * hd, 0.0f);
  std::fill(m, m + G, -std::numeric_limits<float>::infinity());
  std::fill(l, l + G, 0.0f);
  float* sc = scratch;  // [G, kTile]
  Piece pieces[kTile];
  size_t si = 0;      // span holding the tile's first position
  int64_t base = 0;   // its first position
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t t1 = std::min(end, t0 + kTile);
    while (base + spans[si].n <= t0) base += spans[si++].n;
    size_t np = 0, sj = si;
    int64_t bj = base;
    for (int64_t p = t0; p < t1;) {
      while (bj + spans[sj].n <= p) bj += spans[sj++].n;
      const int64_t n = std::min(t1, bj + spans[sj].n) - p;
      pieces[np++] = {&spans[sj], p - bj, n, p - t0};
      p += n;
    }
    for (size_t i = 0; i < np; ++i) switch (pieces[i].sp->elem) {
        case KvElem::F32: ScorePiece<float>(q, qs, G, hd, kvh, kv_head, pieces[i], sc); break;
        case KvElem::BF16: ScorePiece<hwy::bfloat16_t>(q, qs, G, hd, kvh, kv_head, pieces[i], sc); break;
        case KvElem::F16: ScorePiece<hwy::float16_t>(q, qs, G, hd, kvh, kv_head, pieces[i], sc); break;
        case KvElem::I8: ScorePiece<int8_t>(q, qs, G, hd, kvh, kv_head, pieces[i], sc); break;
      }
    SoftmaxTile(sc, G, t1 - t0, hd, o, m, l);
    for (size_t i = 0; i < np; ++i) switch (pieces[i].sp->elem) {
        case KvElem::F32: AccumulatePiece<float>(sc, G, hd, kvh, kv_head, pieces[i], o); break;
        case KvElem::BF16: AccumulatePiece<hwy::bfloat16_t>(sc, G, hd, kvh, kv_head, pieces[i], o); break;
        case KvElem::F16: AccumulatePiece<hwy::float16_t>(sc, G, hd, kvh, kv_head, pieces[i], o); break;
        case KvElem::I8: AccumulatePiece<int8_t>(sc, G, hd, kvh, kv_head, pieces[i], o); break;
      }
  }
}

// out [G, hd] = inv[g] · Σ_j w[g, j] · o_j[g] over `parts` partial states, o_j at states + j·stride
// (w: [G, parts], a zero weight skips its part). Each element sums the parts in order, one FMA
// per part, whatever the vector width.
void AttendWeightedSum(int64_t G, int64_t hd, const float* states, size_t stride, int64_t parts, const float* w,
                       const float* inv, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  for (int64_t g = 0; g < G; ++g) {
    const float* wg = w + g * parts;
    float* og = out + g * hd;
    int64_t t = 0;
    for (; t + N <= hd; t += N) {
      auto acc = hn::Zero(d);
      for (int64_t j = 0; j < parts; ++j)
        if (wg[j] != 0.0f)
          acc = hn::MulAdd(hn::Set(d, wg[j]), hn::LoadU(d, states + size_t(j) * stride + size_t(g * hd + t)), acc);
      hn::StoreU(hn::Mul(acc, hn::Set(d, inv[g])), d, og + t);
    }
    for (; t < hd; ++t) {
      float acc = 0.0f;
      for (int64_t j = 0; j < parts; ++j)
        if (wg[j] != 0.0f) acc = std::fma(wg[j], states[size_t(j) * stride + size_t(g * hd + t)], acc);
      og[t] = acc * inv[g];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace g4::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "platform/aligned_rows.h"
#include "platform/error.h"

namespace g4::ops {
HWY_EXPORT(AttendPartial);
HWY_EXPORT(SoftmaxTile);
HWY_EXPORT(SoftmaxTileBf16);
HWY_EXPORT(AttendWeightedSum);

void softmax_tile(float* sc, int64_t group, int64_t n, int64_t hd, float* o, float* m, float* l) {
  HWY_DYNAMIC_DISPATCH(SoftmaxTile)(sc, group, n, hd, o, m, l);
}

void softmax_tile_bf16(float* sc, int64_t group, int64_t n, int64_t hd, float* o, float* m, float* l) {
  HWY_DYNAMIC_DISPATCH(SoftmaxTileBf16)(sc, group, n, hd, o, m, l);
}

namespace {
constexpr int64_t kTileOnce = kAttendTile;  // = kTile in every target
}

void check_attend_args(int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end) {
  if (group < 1 || kv.hd < 1 || kv.kvh < 1 || kv_head < 0 || kv_head >= kv.kvh || begin < 0 || end <= begin)
    throw Error("attention: bad arguments (group " + std::to_string(group) + ", kv head " + std::to_string(kv_head) +
                " of " + std::to_string(kv.kvh) + ", positions [" + std::to_string(begin) + ", " + std::to_string(end) +
                "))");
  int64_t total = 0;
  for (size_t i = 0; i < kv.count; ++i) total += kv.spans[i].n;
  if (end > total)
    throw Error("attention: positions up to " + std::to_string(end) + " asked of " + std::to_string(total) + " keys");
}

void attend_partial(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                    float* o, float* m, float* l) {
  check_attend_args(group, kv, kv_head, begin, end);
  // The query rows are copied onto cache lines (aligned_rows.h): the score loop loads each query
  // vector once per key, and rows at malloc's 16-byte offset split every such load in two.
  constexpr size_t kMaxScratch = size_t(1) << 40;  // floats; bounds the products below
  if (size_t(group) > kMaxScratch / (size_t(kTileOnce) + size_t(kv.hd) + 16))
    throw Error("attention: " + std::to_string(group) + " query rows of " + std::to_string(kv.hd) +
                " values are more than the scratch can hold");
  thread_local std::vector<float> score_tile, query_rows;
  score_tile.resize(size_t(group * kTileOnce));
  size_t qs = 0;
  float* qa = aligned_rows(query_rows, size_t(group), size_t(kv.hd), qs);
  for (int64_t g = 0; g < group; ++g) std::memcpy(qa + size_t(g) * qs, q + g * kv.hd, size_t(kv.hd) * sizeof(float));
  HWY_DYNAMIC_DISPATCH(AttendPartial)(qa, int64_t(qs), group, kv.spans, kv.count, kv.kvh, kv.hd, kv_head, begin, end,
                                      o, m, l, score_tile.data());
}

void attend_merge_finish(int64_t group, int64_t hd, const float* states, size_t stride, int64_t parts, float* out) {
  if (group < 1 || hd < 1 || parts < 1 || stride < size_t(group * (hd + 2)))
    throw Error("attention merge: bad arguments (group " + std::to_string(group) + ", hd " + std::to_string(hd) + ", " +
                std::to_string(parts) + " parts, " + std::to_string(stride) + " floats apart)");
  // Each part's weight e^(m_j - max m) (0 for an empty part, l = 0, and below
  // e^kAttendMinWeightExponent, as the softmax tiles take it), then the sum of the weighted l.
  thread_local std::vector<float> w, inv;
  w.assign(size_t(group * parts), 0.0f);
  inv.assign(size_t(group), 0.0f);
  auto m_of = [&](int64_t j, int64_t g) { return states[size_t(j) * stride + size_t(group * hd + g)]; };
  auto l_of = [&](int64_t j, int64_t g) { return states[size_t(j) * stride + size_t(group * hd + group + g)]; };
  for (int64_t g = 0; g < group; ++g) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < parts; ++j)
      if (l_of(j, g) > 0.0f) mx = std::max(mx, m_of(j, g));
    float l = 0.0f;
    for (int64_t j = 0; j < parts; ++j)
      if (l_of(j, g) > 0.0f && m_of(j, g) - mx >= kAttendMinWeightExponent) {
        float& wj = w[size_t(g * parts + j)];
        wj = std::exp(m_of(j, g) - mx);
        l += wj * l_of(j, g);
      }
    if (!(l > 0.0f))
      throw Error("attention merge: the " + std::to_string(parts) + " parts hold no keys for head " + std::to_string(g));
    inv[size_t(g)] = 1.0f / l;
  }
  HWY_DYNAMIC_DISPATCH(AttendWeightedSum)(group, hd, states, stride, parts, w.data(), inv.data(), out);
}

void attend_finish(int64_t group, int64_t hd, const float* o, const float* l, float* out) {
  for (int64_t g = 0; g < group; ++g) {
    const float inv = 1.0f / l[g];
    for (int64_t t = 0; t < hd; ++t) out[g * hd + t] = o[g * hd + t] * inv;
  }
}

void attend_row(const float* q, int64_t nH, const KvSpans& kv, int64_t begin, int64_t end, float* out) {
  if (kv.kvh < 1 || nH % kv.kvh != 0)
    throw Error("attention: " + std::to_string(nH) + " query heads is not a multiple of " + std::to_string(kv.kvh) +
                " kv heads");
  const int64_t G = nH / kv.kvh, hd = kv.hd;
  std::vector<float> o(static_cast<size_t>(G * hd)), m(static_cast<size_t>(G)), l(static_cast<size_t>(G));
  for (int64_t kh = 0; kh < kv.kvh; ++kh) {
    attend_partial(q + kh * G * hd, G, kv, kh, begin, end, o.data(), m.data(), l.data());
    attend_finish(G, hd, o.data(), l.data(), out + kh * G * hd);
  }
}

}  // namespace g4::ops
#endif
