#include "ops/amx/gemm_q8_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/amx/tile_model.h"
#include "platform/amx_tile_config.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

constexpr int kBlockQuads = int(kQ8Block / 4);              // B tile rows: one block's 32 bytes in quads
constexpr uint64_t kBlockTileBytes = kBlockQuads * kTileRowBytes;  // one block column of a group: 512 B

// The tile registers' roles: tmm p sums block b (p = b mod 2), tmm 2 + p its 16 tokens' bytes,
// tmm 4 + p the group's block column. Consecutive blocks alternate registers, so the next
// block's loads and product need not wait for this block's sums to be stored.
TileConfig token_tile_config(int tokens) {
  TileConfig c;
  for (int p = 0; p < 2; ++p) {
    c.set(p, tokens, kTileRowBytes);
    c.set(2 + p, tokens, int(kQ8Block));
    c.set(4 + p, kBlockQuads, kTileRowBytes);
  }
  return c;
}

struct EmulatedInt8Tiles : TileRegisterModel {
  void dot(int p) { dpbsud(p, 2 + p, 4 + p); }
  void release() {}
};

struct AmxInt8Tiles {
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void configure(const TileConfig& c) {
    asm volatile("" ::: "memory");  // LDTILECFG's asm names only 8 of the config's 64 bytes as read
    _tile_loadconfig(&c);
  }
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void load(int t, const void* p, size_t stride) {
    const long s = long(stride);
    switch (t) {
      case 2: _tile_loadd(2, p, s); break;
      case 3: _tile_loadd(3, p, s); break;
      case 4: _tile_loadd(4, p, s); break;
      default: _tile_loadd(5, p, s); break;
    }
  }
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void zero(int t) {
    if (t == 0) _tile_zero(0);
    else _tile_zero(1);
  }
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void store(int t, void* p, size_t stride) {
    if (t == 0) _tile_stored(0, p, long(stride));
    else _tile_stored(1, p, long(stride));
  }
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void dot(int p) {
    if (p == 0) _tile_dpbsud(0, 2, 4);
    else _tile_dpbsud(1, 3, 5);
  }
  G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void release() { _tile_release(); }
};

// One 16-row group's operands: where block column b's B tile and its 16 f16 weight scales are.
struct GroupColumns {
  const std::byte* group;     // the group's bytes (scales; Q8_0 values)
  const std::byte* unpacked;  // Q4_0: the group's values split into bytes, kBlockTileBytes per block; else null
  uint64_t column_bytes;
  int64_t blocks;
  const std::byte* values(int64_t b) const {
    return unpacked ? unpacked + uint64_t(b) * kBlockTileBytes : group + interleaved_values_at(column_bytes, blocks, b);
  }
  const std::byte* scales(int64_t b) const { return group + interleaved_scales_at(column_bytes, b); }
};

// Q4_0_R16 block columns [b0, b1) (each 4 vectors: byte 4r + k = packed byte 4j + k of row r) ->
// 8 B tile rows each, at out + b · kBlockTileBytes:
// rows j = low nibbles of vector j (values 4j + k), rows 4 + j = high nibbles (values 16 + 4j + k).
G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void unpack_q4_group(const std::byte* group, int64_t blocks, int64_t b0,
                                                           int64_t b1, std::byte* out) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int64_t b = b0; b < b1; ++b) {
    const std::byte* v = group + interleaved_values_at(kQ4ColumnBytes, blocks, b);
    std::byte* o = out + uint64_t(b) * kBlockTileBytes;
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(v + 64 * j);
      _mm512_storeu_si512(o + 64 * j, _mm512_and_si512(raw, nibble));
      _mm512_storeu_si512(o + 64 * (4 + j), _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble));
    }
  }
}

// Each token's f32 step for one block as the VPDPBUSD kernel takes it: s = start + sum,
// acc = fma(float(s), d_w · d_x, acc). sums: the block's 16 x 16 int32 tile as stored.
G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C inline void scale_block_sums(const int32_t* sums, const std::byte* scales,
                                                                   const int32_t* start, const float* xs, int count,
                                                                   __m512* acc) {
  const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  #pragma GCC unroll 16
  for (int m = 0; m < int(kTileTokens); ++m)
    if (m < count) {
      const __m512i s = _mm512_add_epi32(_mm512_load_si512(sums + kTileTokens * m), _mm512_set1_epi32(start[m]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, _mm512_set1_ps(xs[m])), acc[m]);
    }
}

// One token tile (`count` <= 16 tokens from token t, a multiple of 16) x one group, block
// columns [b0, b1): per block one tile product into int32 sums, stored, then each token's f32
// step (scale_block_sums). Block b + 1's product is issued before block b's sums are stored,
// and block b is scaled one step later: the tile unit then has the next product while the
// vector units scale, and the sums' loads find a store issued a step earlier (5-20% faster on
// an AMX Xeon, g4_microbench Prefill512 alternated; a product issued straight after its
// loads, stored and scaled at once left the two units taking turns). The accumulators start
// at 0 for b0 = 0 and are loaded back from y otherwise (stored by the chunk before: exact, so
// the steps still chain in block order). `loaded`: the token count the configuration was made
// for.
template <class Unit>
G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C void token_tile(Unit& u, int& loaded, const Q8Activations& a, bool q4,
                                                      const GroupColumns& g, int64_t t, int count, float* y,
                                                      int64_t ldy, int64_t b0, int64_t b1) {
  if (count != loaded) {
    u.configure(token_tile_config(count));
    loaded = count;
  }
  const size_t first = a.tile_cell(t, b0);
  const int8_t* xq = a.tile_q.data() + first * kQ8Block;
  const int32_t* start = (q4 ? a.tile_q4_start : a.tile_q8_start).data() + first;
  const float* xs = a.tile_scale.data() + first;
  alignas(64) int32_t sums[2][kTileTokens * kTileTokens];
  __m512 acc[kTileTokens];
  #pragma GCC unroll 16
  for (int m = 0; m < int(kTileTokens); ++m)
    acc[m] = b0 > 0 && m < count ? _mm512_loadu_ps(y + (t + m) * ldy) : _mm512_setzero_ps();
  auto issue = [&](int64_t b) {
    const int p = int(b & 1);
    u.load(2 + p, xq + (b - b0) * int64_t(kTileTokens * kQ8Block), kQ8Block);
    u.load(4 + p, g.values(b), kTileRowBytes);
    u.zero(p);
    u.dot(p);
  };
  issue(b0);
  for (int64_t b = b0; b < b1; ++b) {
    const int p = int(b & 1);
    if (b + 1 < b1) issue(b + 1);
    u.store(p, sums[p], kTileRowBytes);  // its asm clobbers memory: the loads below follow it
    if (b > b0) {
      scale_block_sums(sums[1 - p], g.scales(b - 1), start, xs, count, acc);
      start += kTileTokens;
      xs += kTileTokens;
    }
  }
  scale_block_sums(sums[(b1 - 1) & 1], g.scales(b1 - 1), start, xs, count, acc);
  #pragma GCC unroll 16
  for (int m = 0; m < int(kTileTokens); ++m)
    if (m < count) _mm512_storeu_ps(y + (t + m) * ldy, acc[m]);
}

// Token blocks, within each the block columns in chunks, within a chunk each group over the
// block's token tiles: a chunk of a group's columns is read from memory once per token block.
template <class Unit>
G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C __attribute__((noinline)) void run_tiles(const Q8Activations& a,
                                                                               const std::byte* w, bool q4,
                                                                               int64_t g_begin, int64_t g_end, float* y,
                                                                               int64_t ldy, Int8TileBlocking blocking) {
  const int64_t blocks = a.in / kQ8Block;
  const uint64_t column_bytes = q4 ? kQ4ColumnBytes : kQ8ColumnBytes, group_bytes = column_bytes * uint64_t(blocks);
  thread_local std::vector<std::byte> unpacked;
  if (q4) unpacked.resize(kBlockTileBytes * uint64_t(blocks));
  asm volatile("" ::: "memory");  // the tile loads' asm does not name the activations it reads
  Unit u;
  int loaded = -1;
  const int64_t chunk = blocking.k_chunk / kQ8Block;
  for (int64_t t0 = 0; t0 < a.T; t0 += blocking.token_block) {
    const int64_t t1 = std::min(a.T, t0 + blocking.token_block);
    for (int64_t b0 = 0; b0 < blocks; b0 += chunk) {
      const int64_t b1 = std::min(blocks, b0 + chunk);
      for (int64_t gi = g_begin; gi < g_end; ++gi) {
        const std::byte* group = w + uint64_t(gi) * group_bytes;
        if (q4) {
          unpack_q4_group(group, blocks, b0, b1, unpacked.data());
          asm volatile("" ::: "memory");  // nor the unpacked bytes
        }
        const GroupColumns g{group, q4 ? unpacked.data() : nullptr, column_bytes, blocks};
        for (int64_t t = t0; t < t1; t += kTileTokens)
          token_tile(u, loaded, a, q4, g, t, int(std::min<int64_t>(kTileTokens, t1 - t)), y + gi * kInterleaveRows, ldy,
                     b0, b1);
      }
    }
  }
  u.release();
}

// The scalar formula on a row-major Q8_0 / Q4_0 row (the check's truth): per block, the exact
// integer sum of the weight values (read back through the format's own dequantize_row: value / d
// is the integer exactly, an 8-bit integer times an f16 scale being exact in f32) times the
// activation bytes, then acc = fma(float(s), d_w · d_x, acc), blocks in order. d_w must be nonzero.
float scalar_formula(const Q8Activations& a, int64_t t, const std::byte* row, DType base) {
  const int64_t blocks = a.in / kQ8Block;
  float values[kQ8Block];
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* blk = row + uint64_t(b) * dtype_block_bytes(base);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const float d = f16_to_f32(dh);
    dequantize_row(base, blk, values, kQ8Block);
    int32_t s = 0;
    for (int i = 0; i < int(kQ8Block); ++i) s += int32_t(std::lrint(values[i] / d)) * a.q[size_t(t * a.in + b * kQ8Block + i)];
    acc = std::fma(float(s), d * a.scale[size_t(t * blocks + b)], acc);
  }
  return acc;
}

}  // namespace
#endif

const char* int8_tiles_name(Int8Tiles t) {
  switch (t) {
    case Int8Tiles::None: return "none";
    case Int8Tiles::Amx: return "AMX-INT8";
    case Int8Tiles::Emulated: return "software model of AMX-INT8";
  }
  return "?";
}

bool int8_tiles_take(DType dtype) { return dtype == DType::Q8_0_R16 || dtype == DType::Q4_0_R16; }

Int8TileBlocking int8_tiles_blocking(int64_t in, uint64_t budget_bytes) {
  // The row unit is a group: ~32 bytes per column (Q8_0 ~17/16 a row, or Q4_0 with its bytes
  // unpacked); a token holds 1 byte per column.
  const TileBlocking b = tile_blocking(in, budget_bytes,
                                       {.step_columns = kQ8Block,
                                        .unit_bytes_per_step = 2 * kInterleaveRows * kQ8Block,
                                        .token_bytes_per_step = kQ8Block,
                                        .panel_tokens = kTileTokens,
                                        .max_panels = 32});
  return {b.token_block, b.k_chunk};
}

void gemm_q8_tiles(Int8Tiles unit, const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                   int64_t o_end, float* y, int64_t ldy, Int8TileBlocking blocking) {
  if (blocking.k_chunk == 0) blocking.k_chunk = a.in;
  const int64_t token_block = blocking.token_block, k_chunk = blocking.k_chunk;
  if (!int8_tiles_take(dtype) || o_begin % kInterleaveRows || o_end % kInterleaveRows || o_begin > o_end ||
      token_block < kTileTokens || token_block % kTileTokens || k_chunk < kQ8Block || k_chunk % kQ8Block)
    throw Error(std::string("gemm_q8_tiles: AMX-INT8 tiles take Q8_0_R16 or Q4_0_R16 rows in whole groups of 16, "
                            "token blocks of whole 16-token tiles and column chunks of whole blocks of 32, got ") +
                std::string(dtype_name(dtype)) + ", rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) +
                "), token block " + std::to_string(token_block) + ", column chunk " + std::to_string(k_chunk));
  if (!(a.layouts & kQ8TokenTiles))
    throw Error("gemm_q8_tiles: the activations (" + std::to_string(a.T) + " tokens) were quantized without the "
                "token-tile layout (kQ8TokenTiles, T > 1)");
  if (!gemm_q8_avx512())
    throw Error(std::string("gemm_q8_tiles: the ") + int8_tiles_name(unit) +
                " kernel's epilogue needs AVX512_VNNI, BW and VL, which this CPU has not confirmed");
  [[maybe_unused]] const bool q4 = dtype == DType::Q4_0_R16;
  [[maybe_unused]] const int64_t g0 = o_begin / kInterleaveRows, g1 = o_end / kInterleaveRows;
  switch (unit) {
#if defined(__x86_64__)
    case Int8Tiles::Emulated: run_tiles<EmulatedInt8Tiles>(a, w, q4, g0, g1, y, ldy, blocking); return;
    case Int8Tiles::Amx: run_tiles<AmxInt8Tiles>(a, w, q4, g0, g1, y, ldy, blocking); return;
#endif
    default: break;
  }
  throw Error(std::string("gemm_q8_tiles: no tile unit (") + int8_tiles_name(unit) + ") on this build");
}

TileKernelCheck check_q8_tiles(Int8Tiles unit) {
  TileKernelCheck c;
#if defined(__x86_64__)
  if (!gemm_q8_avx512()) {
    c.detail = "the epilogue's AVX512_VNNI/BW/VL is not confirmed on this CPU";
    return c;
  }
  constexpr int64_t T = 37, in = 96, out = 48, blocks = in / kQ8Block;
  std::mt19937 rng(31);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(T * in));
  for (auto& v : x) v = dist(rng);
  Q8Activations a;
  quantize_activations(x.data(), T, in, a, kQ8TokenTiles);
  for (bool q4 : {false, true}) {
    const DType base = q4 ? DType::Q4_0 : DType::Q8_0;
    const uint64_t rb = row_bytes(base, in);
    std::vector<std::byte> rows(size_t(out) * rb), w(rows.size());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t b = 0; b < blocks; ++b) {
        std::byte* blk = rows.data() + o * rb + b * dtype_block_bytes(base);
        const uint16_t d = f32_to_f16(0.01f + 0.001f * float(rng() % 64));
        std::memcpy(blk, &d, 2);
        for (size_t i = 2; i < dtype_block_bytes(base); ++i) blk[i] = std::byte(rng() & 0xFF);  // after the f16 d
      }
    for (int64_t g = 0; g < out / kInterleaveRows; ++g)
      interleave_group(base, rows.data() + g * kInterleaveRows * rb, in, w.data() + g * kInterleaveRows * rb);
    std::vector<float> y(size_t(T * out), NAN);
    if (!run_kernel_check(c, std::string(int8_tiles_name(unit)) + " kernel", [&] {
          gemm_q8_tiles(unit, a, w.data(), interleaved_dtype(base), 0, out, y.data(), out, {32, 64});
        }))
      return c;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        const float want = scalar_formula(a, t, rows.data() + o * rb, base), got = y[size_t(t * out + o)];
        if (std::memcmp(&want, &got, sizeof got)) {
          c.detail = std::string(dtype_name(base)) + " token " + std::to_string(t) + ", row " + std::to_string(o) + ": " +
                     std::to_string(got) + ", the scalar formula " + std::to_string(want) + " (must match bit for bit)";
          return c;
        }
      }
  }
  pass_kernel_check(c, std::string(int8_tiles_name(unit)) +
                           " kernel: 37 tokens x 96 columns x 48 rows of Q8_0 and of Q4_0 (token blocks of 32, column "
                           "chunks of 64), every output bit-identical to the scalar formula (exact int32 block sums, "
                           "the VPDPBUSD kernel's f32 steps)");
#else
  c.detail = std::string("no ") + int8_tiles_name(unit) + " kernel on this build";
#endif
  return c;
}

const TileKernelCheck& amx_int8_kernel_check() {
  static const TileKernelCheck check = gated_kernel_check(
      host_cpu().amx_int8_usable(), "the probe and tile self-test did not confirm AMX-INT8 on this CPU",
      [] { return check_q8_tiles(Int8Tiles::Amx); });
  return check;
}

bool amx_int8_kernel_usable() { return amx_int8_kernel_check().passed; }

}  // namespace g4::ops
