// Weight products on AMX-BF16 tiles (TDPBF16PS): y[T, out] = bf16(x)[T, in] · W[out, in]ᵀ for
// BF16_R16 weights (platform/row_interleave.h), f32 accumulation.
//
// A 16-row BF16_R16 group is already what TDPBF16PS takes as its B operand: the group's 64-byte
// vectors 16s..16s+15 hold, for each of its 16 rows, the value pairs of columns 32s..32s+31, so
// they are one B tile (16 tile rows x 16 output rows x one bf16 pair) read with a 64-byte
// stride, no repacking. The A operand is 16 tokens' bf16 activations, 32 columns each, which the
// rounding of the activations lays out as tiles (round_to_bf16_tile_panels): each tile 1 KiB in
// a row, so the tiles load as a sequential stream rather than 16 rows one activation row apart
// (for widths that are multiples of 2048 that stride maps all 16 rows to one L1 set). Each step
// (32 columns) multiplies up to 2 x 16 tokens
// by 2 x 16 weight rows into 4 tiles of f32 sums (tmm0..3 sums, tmm4..5 tokens, tmm6..7 rows).
//
// Numerics: every sum y[t, o] starts at 0 and takes the steps in column order, and a tile
// product computes each of its elements from that element's row and column only, so a token's
// bits depend neither on the other tokens in the call nor on the tile or thread it falls in:
// batching and chunking change nothing, provided every product of that matrix runs here, one
// token or many (ops::matmul sends all of them here once the tiles are in use). The order within
// one instruction is the hardware's; results are held to ref::matmul within a stated bound, and
// to themselves bit for bit across batch sizes.
//
// The tiles run on the CPU's AMX-BF16 only after the probe (cpuid, the OS's grant of tile
// state), the one-instruction self-test and amx_bf16_kernel_check (this kernel, on this CPU,
// against the scalar sum) have all passed. Bf16Tiles::Emulated runs the same kernel on the
// software model of the tile registers (tile_model.h: the SDM's TDPBF16PS, per element the even
// then the odd product of each pair added with round-to-nearest-even; denormal inputs read as
// zero and denormal sums flushed to zero), so its tiling is tested on CPUs without AMX. The model
// is slow: for tests only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/amx/tile_kernel_check.h"

namespace g4::ops {

enum class Bf16Tiles { None, Amx, Emulated };
const char* bf16_tiles_name(Bf16Tiles t);  // "none", "AMX-BF16", "software model of AMX-BF16"

// Whether a matrix of this width runs on the tiles: whole steps of 32 columns (one 64-byte
// tile row of bf16). Narrower remainders would need a second tile shape; such matrices stay on
// the VDPBF16PS kernel for every token count, which keeps their batching exact too.
bool bf16_tiles_fit(int64_t in);

// Prefill walks the tokens in blocks and, within a block, the columns in chunks: each pair of
// row groups meets a whole block for one chunk of columns (that chunk of its weights read from
// memory once per block, then from cache) while the block's activations of the chunk stay in L2.
// The chunk: equal whole steps of 32 columns, the pair's share of it (64 bytes per column) at
// most an eighth of `budget_bytes`; the block: as many 32-token panels as fit the rest (chunk x 2
// bytes per token), at least 1 and at most 16. Budget 0: one panel, all columns. Neither changes
// a result bit: a chunk after the first loads the sums the one before stored (exact in f32), so
// every sum still takes the steps in column order.
struct Bf16TileBlocking {
  int64_t token_block = 64;  // a positive multiple of 32
  int64_t k_chunk = 0;       // columns per chunk, a positive multiple of 32; 0: all of them
};
Bf16TileBlocking bf16_tiles_blocking(int64_t in, uint64_t budget_bytes);

// The activations as the tiles read them, "tile panels": tokens in panels of 32, and within a
// panel, step by step (32 columns), the 32 tokens' 64-byte rows one after another:
// [ceil(T / 32)][in / 32][32 tokens][32 columns] bf16. Token tile i of step s in panel p is the
// 1 KiB at ((p · in / 32 + s) · 32 + 16 · i) · 32. A last partial panel's missing tokens are
// neither written nor read.
int64_t bf16_tile_panel_elements(int64_t T, int64_t in);
// Rounds tokens [t0, t1) of x [T, in] (x points at token 0; in a multiple of 32) to bf16, round to
// nearest even, into their places in `panels` (bf16_tile_panel_elements(T, in) values). Disjoint
// token ranges may be rounded by different threads.
void round_to_bf16_tile_panels(const float* x, int64_t t0, int64_t t1, int64_t in, uint16_t* panels);
// The same layout from values already bf16: xb [T, in] row-major into `panels` (for the kernel
// check and tests).
void pack_bf16_tile_panels(const uint16_t* xb, int64_t T, int64_t in, uint16_t* panels);

// y[t * ldy + o] for o in [o_begin, o_end), t in [0, T): Σ_i x[t, i] · w[o, i], x in tile panels
// (above), w BF16_R16 [out, in] (o_begin, o_end multiples of 16; in a multiple of 32; blocking as
// Bf16TileBlocking says; else g4::Error). unit Amx requires amx_bf16_kernel_usable(); Emulated
// runs anywhere.
void gemm_bf16_tiles(Bf16Tiles unit, const uint16_t* panels, int64_t T, int64_t in, const std::byte* w, int64_t o_begin,
                     int64_t o_end, float* y, int64_t ldy, Bf16TileBlocking blocking = {});

// The one-time check of this kernel on this CPU's AMX-BF16 (item 7 of the fast-path issue: an
// optional unit is used only after the probe confirms it and a self-test passes). Runs once per
// process, on first use: a [37 tokens x 96 columns] x [48 rows] product (a full and a partial
// token tile, a pair of row groups and one alone, three steps) against the scalar sum of the
// same bf16 values within 96 f32 roundings, and tokens alone and in a smaller batch against
// their rows of the full batch, bit for bit. Any SIGILL, mismatch or difference fails it.
const TileKernelCheck& amx_bf16_kernel_check();
// host_cpu().amx_bf16_usable() and amx_bf16_kernel_check() passed.
bool amx_bf16_kernel_usable();

// For tests: the same check on a unit of the caller's choice (Emulated everywhere; Amx only
// where the probe confirmed it).
TileKernelCheck check_bf16_tiles(Bf16Tiles unit);

}  // namespace g4::ops
