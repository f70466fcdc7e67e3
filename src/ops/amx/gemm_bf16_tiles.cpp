#include "ops/amx/gemm_bf16_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/matmul/gemm_bf16.h"  // round_rows_to_bf16
#include "ops/matmul/gemm_q8.h"    // walk_interleaved_groups
#include "ops/amx/tile_model.h"
#include "platform/amx_tile_config.h"
#include "platform/device.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"
#endif

namespace g4::ops {

namespace {

constexpr int64_t kStepColumns = 32;                          // bf16 values in one 64-byte tile row
constexpr uint64_t kStepGroupBytes = kTileRows * kTileRowBytes;  // one step of a 16-row group: one B tile
constexpr int kTilePanelTokens = 2 * kTileRows;                   // two token tiles per step

// The tile registers' roles: tmm 2·i + j sums token tile i x row group j, tmm 4 + i holds token
// tile i, tmm 6 + j row group j.
TileConfig panel_config(int tokens0, int tokens1) {
  TileConfig c;
  c.set(0, tokens0, kTileRowBytes);
  c.set(1, tokens0, kTileRowBytes);
  c.set(2, tokens1, kTileRowBytes);
  c.set(3, tokens1, kTileRowBytes);
  c.set(4, tokens0, kTileRowBytes);
  c.set(5, tokens1, kTileRowBytes);
  c.set(6, kTileRows, kTileRowBytes);
  c.set(7, kTileRows, kTileRowBytes);
  return c;
}

// The software model (tile_model.h) in the same roles.
struct EmulatedTiles : TileRegisterModel {
  void dot(int token_tile, int row_tile) { dpbf16ps(2 * token_tile + row_tile, 4 + token_tile, 6 + row_tile); }
  void release() {}
};

#if defined(__x86_64__)
// The CPU's tiles, in the same roles (the intrinsics name their registers by literal numbers).
struct AmxTiles {
  G4_TARGET_AMX_BF16 void configure(const TileConfig& c) {
    asm volatile("" ::: "memory");  // LDTILECFG's asm names only 8 of the config's 64 bytes as read
    _tile_loadconfig(&c);
  }
  G4_TARGET_AMX_BF16 void load(int t, const void* p, size_t stride) {
    const long s = long(stride);
    switch (t) {
      case 0: _tile_loadd(0, p, s); break;  // sums carried over from the previous column chunk
      case 1: _tile_loadd(1, p, s); break;
      case 2: _tile_loadd(2, p, s); break;
      case 3: _tile_loadd(3, p, s); break;
      case 4: _tile_loadd(4, p, s); break;
      case 5: _tile_loadd(5, p, s); break;
      case 6: _tile_loadd(6, p, s); break;
      default: _tile_loadd(7, p, s); break;
    }
  }
  G4_TARGET_AMX_BF16 void zero(int t) {
    switch (t) {
      case 0: _tile_zero(0); break;
      case 1: _tile_zero(1); break;
      case 2: _tile_zero(2); break;
      default: _tile_zero(3); break;
    }
  }
  G4_TARGET_AMX_BF16 void store(int t, void* p, size_t stride) {
    const long s = long(stride);
    switch (t) {
      case 0: _tile_stored(0, p, s); break;
      case 1: _tile_stored(1, p, s); break;
      case 2: _tile_stored(2, p, s); break;
      default: _tile_stored(3, p, s); break;
    }
  }
  G4_TARGET_AMX_BF16 void dot(int token_tile, int row_tile) {
    switch (2 * token_tile + row_tile) {
      case 0: _tile_dpbf16ps(0, 4, 6); break;
      case 1: _tile_dpbf16ps(1, 4, 7); break;
      case 2: _tile_dpbf16ps(2, 5, 6); break;
      default: _tile_dpbf16ps(3, 5, 7); break;
    }
  }
  G4_TARGET_AMX_BF16 void release() { _tile_release(); }
};
#define G4_TILES_TARGET G4_TARGET_AMX_BF16
#else
#define G4_TILES_TARGET
#endif

// One panel: `count` tokens (up to 32) from token t x one or two 16-row groups from g, over all
// steps. `loaded` is the token count the unit's configuration was made for (-1: none yet).
// Columns [s0, s1) steps of 32: the sums start at 0 for the first step (s0 = 0) and are loaded
// back from y otherwise (a column chunk after the first: f32 stored and loaded exactly, so each sum
// still takes the steps in column order, as one pass over all columns would).
template <class Unit>
G4_TILES_TARGET void panel(Unit& u, int& loaded, const uint16_t* panels, int64_t in, const std::byte* w, uint64_t group_bytes,
                           bool pair, int64_t g, int64_t t, int count, float* y, int64_t ldy, int64_t s0, int64_t s1) {
  const int tokens0 = std::min(count, kTileRows), tokens1 = count - tokens0;
  if (count != loaded) {
    u.configure(panel_config(tokens0, tokens1));
    loaded = count;
  }
  const int groups = pair ? 2 : 1;
  float* const sums = y + t * ldy + kInterleaveRows * g;  // token tile i x group j at sums + 16 i ldy + 16 j
  for (int i = 0; i < (tokens1 ? 2 : 1); ++i)
    for (int j = 0; j < groups; ++j) {
      if (s0 == 0)
        u.zero(2 * i + j);
      else
        u.load(2 * i + j, sums + kTileRows * i * ldy + kInterleaveRows * j, size_t(ldy) * sizeof(float));
    }
  // t is a panel's first token: the panel starts at 32 · in · (t / 32); step s0 of it and of the groups.
  const uint16_t* a = panels + t * in + s0 * kTilePanelTokens * kStepColumns;
  const std::byte* b = w + uint64_t(g) * group_bytes + uint64_t(s0) * kStepGroupBytes;
  const int64_t steps = s1 - s0, a_step = kTilePanelTokens * kStepColumns;
  if (tokens1 && pair) {
    // Two token tiles x two row groups, software-pipelined: each load follows the product before
    // it and fills a tile whose last reader was issued one product earlier, so a load can run
    // beside a product rather than behind all four of a step. Same products in the same order per
    // sum: the bits are those of the plain loop below.
    const std::byte* b1 = b + group_bytes;
    u.load(4, a, kTileRowBytes);
    u.load(6, b, kTileRowBytes);
    for (int64_t s = 0; s < steps; ++s) {
      const uint16_t* step = a + s * a_step;
      u.dot(0, 0);
      u.load(7, b1 + uint64_t(s) * kStepGroupBytes, kTileRowBytes);
      u.dot(0, 1);
      u.load(5, step + kTileRows * kStepColumns, kTileRowBytes);
      u.dot(1, 0);
      if (s + 1 < steps) u.load(4, step + a_step, kTileRowBytes);
      u.dot(1, 1);
      if (s + 1 < steps) u.load(6, b + uint64_t(s + 1) * kStepGroupBytes, kTileRowBytes);
    }
  } else {
    for (int64_t s = 0; s < steps; ++s) {
      const uint16_t* step = a + s * a_step;
      u.load(4, step, kTileRowBytes);
      if (tokens1) u.load(5, step + kTileRows * kStepColumns, kTileRowBytes);
      for (int j = 0; j < groups; ++j)
        u.load(6 + j, b + uint64_t(j) * group_bytes + uint64_t(s) * kStepGroupBytes, kTileRowBytes);
      for (int i = 0; i < (tokens1 ? 2 : 1); ++i)
        for (int j = 0; j < groups; ++j) u.dot(i, j);
    }
  }
  for (int i = 0; i < (tokens1 ? 2 : 1); ++i)
    for (int j = 0; j < groups; ++j)
      u.store(2 * i + j, sums + kTileRows * i * ldy + kInterleaveRows * j, size_t(ldy) * sizeof(float));
}

// Groups [g_begin, g_end) x all T tokens: decode takes the groups in pairs over all columns;
// prefill walks blocks of token_block tokens, within each the columns in chunks of k_chunk, and
// within a chunk each pair of groups over the block's panels of 32. A chunk of a pair's weights
// is read from memory once per token block and then from cache; without chunks, a pair too wide
// for the L2 beside one panel (E2B's down_proj: 768 KiB at 12288 columns) was read again for
// every 32 tokens.
template <class Unit>
G4_TILES_TARGET __attribute__((noinline)) void run_tiles(const uint16_t* panels, int64_t T, int64_t in, const std::byte* w,
                                                         int64_t g_begin, int64_t g_end, float* y, int64_t ldy,
                                                         Bf16TileBlocking blocking) {
  asm volatile("" ::: "memory");  // the tile loads' asm does not name the activations it reads
  Unit u;
  int loaded = -1;
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * uint64_t(in) * sizeof(uint16_t);
  const int64_t steps = in / kStepColumns, chunk = blocking.k_chunk / kStepColumns;
  if (T == 1) {
    for (int64_t g = g_begin; g < g_end; g += 2)
      panel(u, loaded, panels, in, w, group_bytes, g + 1 < g_end, g, 0, 1, y, ldy, 0, steps);
  } else {
    for (int64_t t0 = 0; t0 < T; t0 += blocking.token_block) {
      const int64_t t1 = std::min(T, t0 + blocking.token_block);
      for (int64_t s0 = 0; s0 < steps; s0 += chunk)
        for (int64_t g = g_begin; g < g_end; g += 2)
          for (int64_t t = t0; t < t1; t += kTilePanelTokens)
            panel(u, loaded, panels, in, w, group_bytes, g + 1 < g_end, g, t,
                  int(std::min<int64_t>(kTilePanelTokens, t1 - t)), y, ldy, s0, std::min(steps, s0 + chunk));
    }
  }
  u.release();
}

}  // namespace

const char* bf16_tiles_name(Bf16Tiles t) {
  switch (t) {
    case Bf16Tiles::None: return "none";
    case Bf16Tiles::Amx: return "AMX-BF16";
    case Bf16Tiles::Emulated: return "software model of AMX-BF16";
  }
  return "?";
}

bool bf16_tiles_fit(int64_t in) { return in > 0 && in % kStepColumns == 0; }

Bf16TileBlocking bf16_tiles_blocking(int64_t in, uint64_t budget_bytes) {
  // The row unit is a pair of groups (64 bytes per column); a token holds 2 bytes per column.
  const TileBlocking b = tile_blocking(in, budget_bytes,
                                       {.step_columns = kStepColumns,
                                        .unit_bytes_per_step = 2 * kStepGroupBytes,
                                        .token_bytes_per_step = kStepColumns * sizeof(uint16_t),
                                        .panel_tokens = kTilePanelTokens,
                                        .max_panels = 16});
  return {b.token_block, b.k_chunk};
}

int64_t bf16_tile_panel_elements(int64_t T, int64_t in) {
  return (T + kTilePanelTokens - 1) / kTilePanelTokens * kTilePanelTokens * in;
}

namespace {

void require_panel_width(int64_t in, const char* who) {
  if (!bf16_tiles_fit(in)) throw Error(std::string(who) + ": width " + std::to_string(in) + " is not whole steps of 32");
}

// Token t's bf16 row [in] into its 64-byte slots of the panel layout.
void place_token(const uint16_t* row, int64_t t, int64_t in, uint16_t* panels) {
  uint16_t* dst = panels + (t / kTilePanelTokens) * kTilePanelTokens * in + (t % kTilePanelTokens) * kStepColumns;
  for (int64_t s = 0; s < in / kStepColumns; ++s)
    std::memcpy(dst + s * kTilePanelTokens * kStepColumns, row + s * kStepColumns, kTileRowBytes);
}

}  // namespace

void round_to_bf16_tile_panels(const float* x, int64_t t0, int64_t t1, int64_t in, uint16_t* panels) {
  require_panel_width(in, "round_to_bf16_tile_panels");
  thread_local std::vector<uint16_t> row;
  row.resize(size_t(in));
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * in;
    if (gemm_bf16_available())
      round_rows_to_bf16(xt, in, row.data());
    else  // nearest even too, for the software model on CPUs without AVX512_BF16 (denormals may
          // differ from VCVTNEPS2BF16's; the tiles read denormal bf16 as zero either way)
      for (int64_t i = 0; i < in; ++i) row[size_t(i)] = f32_to_bf16(xt[i]);
    place_token(row.data(), t, in, panels);
  }
}

void pack_bf16_tile_panels(const uint16_t* xb, int64_t T, int64_t in, uint16_t* panels) {
  require_panel_width(in, "pack_bf16_tile_panels");
  for (int64_t t = 0; t < T; ++t) place_token(xb + t * in, t, in, panels);
}

void gemm_bf16_tiles(Bf16Tiles unit, const uint16_t* panels, int64_t T, int64_t in, const std::byte* w, int64_t o_begin,
                     int64_t o_end, float* y, int64_t ldy, Bf16TileBlocking blocking) {
  if (blocking.k_chunk == 0) blocking.k_chunk = in;
  const int64_t token_block = blocking.token_block, k_chunk = blocking.k_chunk;
  if (!bf16_tiles_fit(in) || o_begin % kInterleaveRows || o_end % kInterleaveRows || o_begin > o_end || T < 1 ||
      token_block < kTilePanelTokens || token_block % kTilePanelTokens || k_chunk < kStepColumns ||
      k_chunk % kStepColumns)
    throw Error("gemm_bf16_tiles: BF16_R16 tiles need a width in whole steps of 32, rows in whole groups of 16, "
                "token blocks of whole 32-token panels and column chunks of whole steps, got " + std::to_string(T) +
                " tokens, width " + std::to_string(in) + ", rows [" + std::to_string(o_begin) + ", " +
                std::to_string(o_end) + "), token block " + std::to_string(token_block) + ", column chunk " +
                std::to_string(k_chunk));
  const int64_t g0 = o_begin / kInterleaveRows, g1 = o_end / kInterleaveRows;
  switch (unit) {
    case Bf16Tiles::Emulated: run_tiles<EmulatedTiles>(panels, T, in, w, g0, g1, y, ldy, blocking); return;
    case Bf16Tiles::Amx:
#if defined(__x86_64__)
      run_tiles<AmxTiles>(panels, T, in, w, g0, g1, y, ldy, blocking);
      return;
#endif
    case Bf16Tiles::None: break;
  }
  throw Error(std::string("gemm_bf16_tiles: no tile unit (") + bf16_tiles_name(unit) + ") on this build");
}

TileKernelCheck check_bf16_tiles(Bf16Tiles unit) {
  constexpr int64_t T = 37, in = 96, out = 48, groups = out / kInterleaveRows;
  std::mt19937 rng(29);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> xb(size_t(T * in)), rows(size_t(out * in));
  for (auto& v : xb) v = f32_to_bf16(dist(rng));
  for (auto& v : rows) v = f32_to_bf16(dist(rng));
  std::vector<std::byte> w(rows.size() * sizeof(uint16_t));
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * uint64_t(in) * sizeof(uint16_t);
  for (int64_t g = 0; g < groups; ++g)
    interleave_group(DType::BF16, reinterpret_cast<const std::byte*>(rows.data()) + g * group_bytes, in,
                     w.data() + g * group_bytes);
  // Tokens [t0, t0 + n) as a batch of their own, in tile panels.
  auto panels_of = [&](int64_t t0, int64_t n) {
    std::vector<uint16_t> p(size_t(bf16_tile_panel_elements(n, in)));
    pack_bf16_tile_panels(xb.data() + t0 * in, n, in, p.data());
    return p;
  };
  const std::vector<uint16_t> p_all = panels_of(0, T), p_one = panels_of(20, 1), p_some = panels_of(30, 5);
  std::vector<float> all(size_t(T * out), NAN), one(size_t(out), NAN), some(size_t(5 * out), NAN);
  TileKernelCheck c;
  const bool ran = run_kernel_check(c, std::string(bf16_tiles_name(unit)) + " kernel", [&] {
    gemm_bf16_tiles(unit, p_all.data(), T, in, w.data(), 0, out, all.data(), out, {32, 64});  // 2 blocks, 2 chunks
    gemm_bf16_tiles(unit, p_one.data(), 1, in, w.data(), 0, out, one.data(), out);
    gemm_bf16_tiles(unit, p_some.data(), 5, in, w.data(), 0, out, some.data(), out);
  });
  if (!ran) return c;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0, magnitude = 0;
      for (int64_t i = 0; i < in; ++i) {
        const double p = double(bf16_to_f32(xb[size_t(t * in + i)])) * double(bf16_to_f32(rows[size_t(o * in + i)]));
        sum += p;
        magnitude += std::fabs(p);
      }
      const double got = all[size_t(t * out + o)], bound = double(in) * 0x1p-24 * magnitude;
      if (!(std::fabs(got - sum) <= bound)) {
        c.detail = "token " + std::to_string(t) + ", row " + std::to_string(o) + ": " + std::to_string(got) +
                   ", the scalar sum " + std::to_string(sum) + " (allowed " + std::to_string(bound) + ")";
        return c;
      }
    }
  if (std::memcmp(one.data(), all.data() + 20 * out, one.size() * sizeof(float)) ||
      std::memcmp(some.data(), all.data() + 30 * out, some.size() * sizeof(float))) {
    c.detail = "tokens alone or 5 at a time differ from the same tokens in a batch of 37";
    return c;
  }
  pass_kernel_check(c, std::string(bf16_tiles_name(unit)) +
                           " kernel: 37 tokens x 96 columns x 48 rows (token blocks of 32, column chunks of 64) within "
                           "96 f32 roundings of the scalar sum, tokens alone and in a smaller batch bit-identical to "
                           "the batch");
  return c;
}

const TileKernelCheck& amx_bf16_kernel_check() {
  static const TileKernelCheck check = gated_kernel_check(
      host_cpu().amx_bf16_usable(), "the probe and tile self-test did not confirm AMX-BF16 on this CPU",
      [] { return check_bf16_tiles(Bf16Tiles::Amx); });
  return check;
}

bool amx_bf16_kernel_usable() { return amx_bf16_kernel_check().passed; }

}  // namespace g4::ops
