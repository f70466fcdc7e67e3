#include "ops/amx/attention_bf16_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/attention/attention_bf16.h"  // attention_bf16_available
#include "ops/matmul/gemm_bf16.h"       // round_rows_to_bf16
#include "ops/amx/tile_model.h"
#include "platform/amx_tile_config.h"
#include "platform/dtype.h"
#include "platform/error.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#endif

namespace g4::ops {

bool attention_tiles_fit(int64_t group, int64_t hd) { return group >= 1 && group <= kTileRows && hd >= 32 && hd % 32 == 0; }

#if defined(__x86_64__)
namespace {

constexpr int64_t kTile = kAttendTile;   // positions per softmax tile
constexpr int64_t kChunk = kTileRows;    // positions per score tile (its rows)
constexpr int64_t kStep = 32;            // dims per score step, positions per value block
static_assert(kTile % kStep == 0, "softmax tiles hold whole value blocks");

// The tile registers' roles, one configuration for the whole call (`group` = G heads):
//  tmm0, tmm1  scores of two blocks of 16 positions   [16 rows, G f32]
//  tmm2, tmm3  their key rows (scores); value B tiles  [16 rows, 64 bytes]
//  tmm4        one step of the query rows, Qᵀ          [16 pairs of dims, G pairs]
//  tmm5        the softmax weights of 32 positions     [G rows, 32 bf16]
//  tmm6, tmm7  the output, 32 dims as two halves       [G rows, 16 f32]
TileConfig attention_config(int G) {
  TileConfig c;
  c.set(0, kTileRows, 4 * G);
  c.set(1, kTileRows, 4 * G);
  c.set(2, kTileRows, kTileRowBytes);
  c.set(3, kTileRows, kTileRowBytes);
  c.set(4, kTileRows, 4 * G);
  c.set(5, G, kTileRowBytes);
  c.set(6, G, kTileRowBytes);
  c.set(7, G, kTileRowBytes);
  return c;
}

struct EmulatedTiles : TileRegisterModel {
  void dot(int c, int a, int b) { dpbf16ps(c, a, b); }
  void release() {}
};

// The CPU's tiles in the same roles (the intrinsics name registers by literal numbers).
struct AmxTiles {
  G4_TARGET_AMX_BF16 void configure(const TileConfig& c) {
    asm volatile("" ::: "memory");  // LDTILECFG's asm names only 8 of the config's 64 bytes as read
    _tile_loadconfig(&c);
  }
  G4_TARGET_AMX_BF16 void load(int t, const void* p, size_t stride) {
    // TILELOADD's asm names no memory as read, and this kernel writes what the tiles load (staged
    // keys, paired values, weights, the rescaled output) between loads: every store before it first.
    asm volatile("" ::: "memory");
    const long s = long(stride);
    switch (t) {
      case 2: _tile_loadd(2, p, s); break;
      case 3: _tile_loadd(3, p, s); break;
      case 4: _tile_loadd(4, p, s); break;
      case 5: _tile_loadd(5, p, s); break;
      case 6: _tile_loadd(6, p, s); break;
      default: _tile_loadd(7, p, s); break;
    }
  }
  G4_TARGET_AMX_BF16 void zero(int t) {
    if (t == 0)
      _tile_zero(0);
    else
      _tile_zero(1);
  }
  G4_TARGET_AMX_BF16 void store(int t, void* p, size_t stride) {
    const long s = long(stride);
    switch (t) {
      case 0: _tile_stored(0, p, s); break;
      case 1: _tile_stored(1, p, s); break;
      case 6: _tile_stored(6, p, s); break;
      default: _tile_stored(7, p, s); break;
    }
  }
  G4_TARGET_AMX_BF16 void dot(int c, int, int) {
    switch (c) {
      case 0: _tile_dpbf16ps(0, 2, 4); break;  // scores, first block
      case 1: _tile_dpbf16ps(1, 3, 4); break;  // scores, second block
      case 6: _tile_dpbf16ps(6, 5, 2); break;  // output, dims {0-3, 8-11, ...}
      default: _tile_dpbf16ps(7, 5, 3); break;  // output, dims {4-7, 12-15, ...}
    }
  }
  G4_TARGET_AMX_BF16 void release() { _tile_release(); }
};

struct Scratch {
  std::vector<uint16_t> qb;                // [G][hd] the query rows rounded to bf16
  std::vector<uint32_t> qt;                // [hd / 32][16][G] query pairs, one B tile per step
  std::vector<float> sct, sc;              // [kTile][G] as the tiles store them; [G][kTile]
  std::vector<uint16_t> pb;                // [G][kTile] bf16 weights, zero past the tile's keys
  std::vector<uint16_t> stage;             // [2][16][hd] key rows that do not lie in a row
  std::vector<uint16_t> vb;                // [2][16][32] one value block, two B tiles
  std::vector<float> op;                   // [G][hd] the output in the tiles' column order
  std::vector<uint16_t> zero;              // [hd] a zero row past the range
  std::vector<const uint16_t*> krow, vrow;
};

// The pair of query values (dims 2k, 2k + 1 of step s) for each head: Qᵀ as B tiles.
G4_TARGET_AVX512F_BW_VL_DQ void lay_out_queries(const uint16_t* qb, int64_t G, int64_t hd, uint32_t* qt) {
  for (int64_t s = 0; s < hd / kStep; ++s)
    for (int64_t k = 0; k < kTileRows; ++k)
      for (int64_t g = 0; g < G; ++g) {
        uint32_t pair;
        std::memcpy(&pair, qb + g * hd + s * kStep + 2 * k, 4);
        qt[(s * kTileRows + k) * G + g] = pair;
      }
}

// The A operand for positions [p, p + count) of the tile (count <= 16): the cache's rows where
// all 16 lie one stride apart, else copied into `stage` (zero rows after count).
struct KeyBlock {
  const uint16_t* rows;
  size_t stride;  // bytes
};
KeyBlock key_block(const uint16_t* const* krow, int64_t count, int64_t hd, int64_t row_stride, uint16_t* stage) {
  bool in_a_row = count == kChunk;
  for (int64_t i = 1; in_a_row && i < kChunk; ++i) in_a_row = krow[i] == krow[0] + i * row_stride;
  if (in_a_row) return {krow[0], size_t(row_stride) * sizeof(uint16_t)};
  for (int64_t i = 0; i < kChunk; ++i) {
    if (i < count)
      std::memcpy(stage + i * hd, krow[i], size_t(hd) * sizeof(uint16_t));
    else
      std::memset(stage + i * hd, 0, size_t(hd) * sizeof(uint16_t));
  }
  return {stage, size_t(hd) * sizeof(uint16_t)};
}

// Lines of rows [0, count) at step s: requested into L1 ahead of their tile loads.
inline void prefetch_step(const uint16_t* const* rows, int64_t count, int64_t s) {
  for (int64_t i = 0; i < count; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i] + s * kStep), _MM_HINT_T0);
}

// sc[g][p] = sct[p][g] for p < n: the scores out of the tiles' layout, 16 positions per gather.
G4_TARGET_AVX512F_BW_VL_DQ void transpose_scores(const float* sct, int64_t G, int64_t n, float* sc) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int(G)));
  for (int64_t p = 0; p < n; p += 16) {
    const __mmask16 mk = n - p >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - p)) - 1);
    for (int64_t g = 0; g < G; ++g)
      _mm512_mask_storeu_ps(sc + g * kTile + p, mk,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, idx, sct + p * G + g, 4));
  }
}

// pb[g][j] = the upper 16 bits of sc[g][j] (already bf16 values) for j < n, zero up to the next
// multiple of 32.
G4_TARGET_AVX512F_BW_VL_DQ void weights_to_bf16(const float* sc, int64_t G, int64_t n, uint16_t* pb) {
  const int64_t padded = (n + kStep - 1) / kStep * kStep;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < padded; j += 16) {
      const int64_t left = std::clamp<int64_t>(n - j, 0, 16);
      const __mmask16 mk = left == 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(_mm512_maskz_loadu_ps(mk, sc + g * kTile + j)), 16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + g * kTile + j), _mm512_cvtepi32_epi16(bits));
    }
}

// Value rows [0, count) (count <= 32; zero rows after), dims [c, c + 32), in pairs of positions:
// B tile 0 row k = rows 2k, 2k + 1 interleaved over dims {0-3, 8-11, 16-19, 24-27}, tile 1 over
// {4-7, 12-15, 20-23, 28-31} (unpacklo/hi work within 128-bit lanes).
G4_TARGET_AVX512F_BW_VL_DQ void pair_values(const uint16_t* const* vrow, int64_t count, int64_t c, uint16_t* vb) {
  for (int64_t k = 0; k < kTileRows; ++k) {
    const __m512i a = 2 * k < count ? _mm512_loadu_si512(vrow[2 * k] + c) : _mm512_setzero_si512();
    const __m512i b = 2 * k + 1 < count ? _mm512_loadu_si512(vrow[2 * k + 1] + c) : _mm512_setzero_si512();
    _mm512_storeu_si512(vb + k * kStep, _mm512_unpacklo_epi16(a, b));
    _mm512_storeu_si512(vb + (kTileRows + k) * kStep, _mm512_unpackhi_epi16(a, b));
  }
}

// o[g][c + 8L + i] = op[g][c + 4L + i], o[g][c + 8L + 4 + i] = op[g][c + 16 + 4L + i] (L < 4,
// i < 4): the tiles' column order back to the head dim's.
void restore_column_order(const float* op, int64_t G, int64_t hd, float* o) {
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < hd; c += kStep)
      for (int64_t L = 0; L < 4; ++L)
        for (int64_t i = 0; i < 4; ++i) {
          o[g * hd + c + 8 * L + i] = op[g * hd + c + 4 * L + i];
          o[g * hd + c + 8 * L + 4 + i] = op[g * hd + c + 16 + 4 * L + i];
        }
}

template <class Unit>
G4_TARGET_AMX_BF16 __attribute__((noinline)) void attend_tiles(const float* q, int64_t G, const KvSpans& kv,
                                                               int64_t kv_head, int64_t begin, int64_t end, float* o,
                                                               float* m, float* l) {
  const int64_t hd = kv.hd, steps = hd / kStep, row_stride = kv.kvh * hd;
  thread_local Scratch s;
  s.qb.resize(size_t(G * hd));
  round_rows_to_bf16(q, G * hd, s.qb.data());
  s.qt.resize(size_t(steps * kTileRows * G));
  lay_out_queries(s.qb.data(), G, hd, s.qt.data());
  s.sct.assign(size_t(kTile * G), 0.0f);
  s.sc.assign(size_t(G * kTile), 0.0f);
  s.pb.assign(size_t(G * kTile), 0);
  s.stage.resize(size_t(2 * kChunk * hd));
  s.vb.resize(size_t(2 * kTileRows * kStep));
  s.op.assign(size_t(G * hd), 0.0f);
  s.zero.assign(size_t(hd), 0);
  std::fill(m, m + G, -std::numeric_limits<float>::infinity());
  std::fill(l, l + G, 0.0f);
  // Every position's rows, found through the spans one by one; zero rows pad a tile's end and
  // the prefetches' look-ahead.
  const int64_t count = end - begin;
  s.krow.assign(size_t(count + kTile + kStep), s.zero.data());
  s.vrow.assign(size_t(count + kTile + kStep), s.zero.data());
  find_bf16_rows(kv, kv_head, begin, end, s.krow.data(), s.vrow.data());
  Unit u;
  u.configure(attention_config(int(G)));
  const size_t q_stride = size_t(4 * G);
  for (int64_t t0 = 0; t0 < count; t0 += kTile) {
    const int64_t n = std::min(count - t0, kTile);
    const uint16_t* const* krow = s.krow.data() + t0;
    const uint16_t* const* vrow = s.vrow.data() + t0;
    // Scores, two blocks of 16 positions at a time. While block pair c is scored, the key lines
    // of the next pair and the value lines of this one are requested (decode reads both from
    // memory; the tile loads alone keep few lines in flight).
    for (int64_t c = 0; c < n; c += 2 * kChunk) {
      const int64_t n0 = std::min(kChunk, n - c), n1 = std::clamp<int64_t>(n - c - kChunk, 0, kChunk);
      const KeyBlock b0 = key_block(krow + c, n0, hd, row_stride, s.stage.data());
      const KeyBlock b1 = n1 ? key_block(krow + c + kChunk, n1, hd, row_stride, s.stage.data() + kChunk * hd) : b0;
      const int64_t ahead = std::max<int64_t>(0, std::min<int64_t>(2 * kChunk, count - (t0 + c + 2 * kChunk)));
      u.zero(0);
      if (n1) u.zero(1);
      for (int64_t st = 0; st < steps; ++st) {
        prefetch_step(krow + c + 2 * kChunk, ahead, st);
        prefetch_step(vrow + c, n0 + n1, st);
        u.load(4, s.qt.data() + st * kTileRows * G, q_stride);
        u.load(2, b0.rows + st * kStep, b0.stride);
        u.dot(0, 2, 4);
        if (n1) {
          u.load(3, b1.rows + st * kStep, b1.stride);
          u.dot(1, 3, 4);
        }
      }
      u.store(0, s.sct.data() + c * G, q_stride);
      if (n1) u.store(1, s.sct.data() + (c + kChunk) * G, q_stride);
    }
    transpose_scores(s.sct.data(), G, n, s.sc.data());
    softmax_tile_bf16(s.sc.data(), G, n, hd, s.op.data(), m, l);
    weights_to_bf16(s.sc.data(), G, n, s.pb.data());
    // Values: 32 dims at a time, the output's two tiles held over the tile's blocks of 32 keys.
    const size_t o_stride = size_t(hd) * sizeof(float), p_stride = size_t(kTile) * sizeof(uint16_t);
    for (int64_t c = 0; c < hd; c += kStep) {
      u.load(6, s.op.data() + c, o_stride);
      u.load(7, s.op.data() + c + kTileRows, o_stride);
      for (int64_t j = 0; j < n; j += kStep) {
        pair_values(vrow + j, std::min(kStep, n - j), c, s.vb.data());
        u.load(5, s.pb.data() + j, p_stride);
        u.load(2, s.vb.data(), kTileRowBytes);
        u.load(3, s.vb.data() + kTileRows * kStep, kTileRowBytes);
        u.dot(6, 5, 2);
        u.dot(7, 5, 3);
      }
      u.store(6, s.op.data() + c, o_stride);
      u.store(7, s.op.data() + c + kTileRows, o_stride);
    }
  }
  u.release();
  restore_column_order(s.op.data(), G, hd, o);
}

// The arguments checked and the unit's kernel run; the AMX gate is the caller's (the kernel
// check runs through here before the gate exists).
void attend_on(Bf16Tiles unit, const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin,
               int64_t end, float* o, float* m, float* l) {
  if (!attention_bf16_available())
    throw Error("attention on tiles: needs AVX512_BF16 confirmed by the probe and its self-test");
  check_attend_args(group, kv, kv_head, begin, end);
  if (!attention_tiles_fit(group, kv.hd))
    throw Error("attention on tiles: " + std::to_string(group) + " heads per kv head with head dim " +
                std::to_string(kv.hd) + " do not fit (1-16 heads, head dim a multiple of 32)");
  for (size_t i = 0; i < kv.count; ++i)
    if (kv.spans[i].elem != KvElem::BF16)
      throw Error("attention on tiles: reads bf16 K/V only; span " + std::to_string(i) + " holds another type");
  switch (unit) {
    case Bf16Tiles::Emulated: attend_tiles<EmulatedTiles>(q, group, kv, kv_head, begin, end, o, m, l); return;
    case Bf16Tiles::Amx: attend_tiles<AmxTiles>(q, group, kv, kv_head, begin, end, o, m, l); return;
    case Bf16Tiles::None: break;
  }
  throw Error("attention on tiles: no tile unit given");
}

}  // namespace

void attend_partial_bf16_tiles(Bf16Tiles unit, const float* q, int64_t group, const KvSpans& kv, int64_t kv_head,
                               int64_t begin, int64_t end, float* o, float* m, float* l) {
  if (unit == Bf16Tiles::Amx && !amx_attention_kernel_usable())
    throw Error("attention on tiles: AMX-BF16 is not confirmed for this kernel on this CPU (" +
                amx_attention_kernel_check().detail + ")");
  attend_on(unit, q, group, kv, kv_head, begin, end, o, m, l);
}

TileKernelCheck check_attention_tiles(Bf16Tiles unit) {
  constexpr int64_t G = 8, hd = 64, n = 300;
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> q(size_t(G * hd));
  for (float& x : q) x = 3.0f * u(rng);
  std::vector<uint16_t> k(size_t(n * hd)), v(size_t(n * hd));
  for (auto& x : k) x = f32_to_bf16(u(rng));
  for (auto& x : v) x = f32_to_bf16(u(rng));
  // Spans of uneven lengths (rows in a row within each, staged across the edges) and one span.
  auto spans_of = [&](const std::vector<int64_t>& lengths) {
    std::vector<KvSpan> spans;
    int64_t at = 0;
    for (size_t i = 0; at < n; ++i) {
      const int64_t len = i < lengths.size() ? std::min(lengths[i], n - at) : n - at;
      spans.push_back({KvElem::BF16, len, k.data() + at * hd, v.data() + at * hd, nullptr, nullptr});
      at += len;
    }
    return spans;
  };
  const std::vector<KvSpan> one = spans_of({}), cut = spans_of({37, 1, 90, 16, 5});
  struct State {
    std::vector<float> o = std::vector<float>(size_t(G * hd)), m = std::vector<float>(G), l = std::vector<float>(G);
  };
  State whole, pieces, tail_whole, tail_pieces;
  TileKernelCheck c;
  const bool ran = run_kernel_check(c, std::string(bf16_tiles_name(unit)) + " attention kernel", [&] {
    auto go = [&](const std::vector<KvSpan>& sp, int64_t b, State& st) {
      attend_on(unit, q.data(), G, KvSpans{sp.data(), sp.size(), 1, hd}, 0, b, n, st.o.data(),
                                st.m.data(), st.l.data());
    };
    go(one, 0, whole);
    go(cut, 0, pieces);
    go(one, 129, tail_whole);
    go(cut, 129, tail_pieces);
  });
  if (!ran) return c;
  for (int64_t g = 0; g < G; ++g) {
    std::vector<double> sc(static_cast<size_t>(n));
    double mx = -INFINITY, sum = 0;
    for (int64_t p = 0; p < n; ++p) {
      double acc = 0;
      for (int64_t i = 0; i < hd; ++i)
        acc += double(bf16_to_f32(f32_to_bf16(q[size_t(g * hd + i)]))) * double(bf16_to_f32(k[size_t(p * hd + i)]));
      mx = std::max(mx, sc[size_t(p)] = acc);
    }
    for (double& x : sc) sum += (x = std::exp(x - mx));
    for (int64_t i = 0; i < hd; ++i) {
      double want = 0;
      for (int64_t p = 0; p < n; ++p) want += sc[size_t(p)] / sum * double(bf16_to_f32(v[size_t(p * hd + i)]));
      const double got = double(whole.o[size_t(g * hd + i)]) / double(whole.l[size_t(g)]);
      if (!(std::fabs(got - want) <= 1.0 / 256)) {
        c.detail = "head " + std::to_string(g) + ", dim " + std::to_string(i) + ": " + std::to_string(got) +
                   ", double precision " + std::to_string(want) + " (allowed 2^-8)";
        return c;
      }
    }
  }
  auto same = [](const State& a, const State& b) {
    return !std::memcmp(a.o.data(), b.o.data(), a.o.size() * 4) && !std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4) &&
           !std::memcmp(a.l.data(), b.l.data(), a.l.size() * 4);
  };
  if (!same(whole, pieces) || !same(tail_whole, tail_pieces)) {
    c.detail = "the same keys in one span and cut into spans gave different bits";
    return c;
  }
  pass_kernel_check(c, std::string(bf16_tiles_name(unit)) +
                           " attention kernel: 8 heads x head dim 64 over 300 keys within 2^-8 of double precision, "
                           "the same keys cut into spans bit-identical");
  return c;
}

const TileKernelCheck& amx_attention_kernel_check() {
  static const TileKernelCheck check = gated_kernel_check(
      amx_bf16_kernel_usable() && attention_bf16_available(),
      "AMX-BF16 (probe, tile self-test, product kernel check) or AVX512_BF16 not confirmed on this CPU",
      [] { return check_attention_tiles(Bf16Tiles::Amx); });
  return check;
}

bool amx_attention_kernel_usable() { return amx_attention_kernel_check().passed; }

#else

void attend_partial_bf16_tiles(Bf16Tiles, const float*, int64_t, const KvSpans&, int64_t, int64_t, int64_t, float*, float*,
                               float*) {
  throw Error("attention on tiles: not built for this architecture");
}
TileKernelCheck check_attention_tiles(Bf16Tiles) { return {false, false, "not built for this architecture"}; }
const TileKernelCheck& amx_attention_kernel_check() {
  static const TileKernelCheck c{false, false, "not built for this architecture"};
  return c;
}
bool amx_attention_kernel_usable() { return false; }

#endif

}  // namespace g4::ops
