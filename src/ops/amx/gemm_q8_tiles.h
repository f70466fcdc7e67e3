// Prefill weight products for Q8_0_R16 / Q4_0_R16 weights on AMX-INT8 tiles (TDPBSUD):
// y[T, out] = x[T, in] · Wᵀ with the activations quantized to int8 in blocks of 32 (gemm_q8.h).
//
// Q8_0 and Q4_0 scale every block of 32 values on both sides, so a block's int32 sum must be
// scaled before the next block is added: each tile product covers exactly one block (K = 32).
// A is 16 tokens' 32 activation bytes of block b (signed; one 512-byte tile, Q8Activations'
// tile_q); B is the 16-row group's block column b, 8 rows of 64 bytes, which a Q8_0_R16 group
// already is (vector j, byte 4r + k = weight 4j + k of row r, offset binary: the unsigned
// operand), and a Q4_0_R16 group is once its nibbles are split into bytes (low nibbles of the
// 4 vectors, then the high ones; done per group once per token block, 512 B per block).
// The tile's 16 x 16 int32 sums are stored, and per token the epilogue runs the steps of the
// VPDPBUSD kernel: s = start + sum (start = −offset · Σ activation bytes, offset 128 or 8),
// acc = fma(float(s), d_w · d_x, acc), blocks in order, acc from 0.
//
// Numerics: block sums of bytes are exact in int32 on either unit, and the f32 steps after them
// are the same instructions in the same order, so every output is bit-identical to the VPDPBUSD
// kernel's (gemm_q8_rows): decode can stay on VPDPBUSD while prefill runs here, and batching or
// chunking still changes no bit (tested against that kernel and against the same formula in
// scalar C++, bit for bit).
//
// The tiles run on the CPU's AMX-INT8 only after the probe (cpuid, the OS's grant of tile
// state), the one-instruction self-test and amx_int8_kernel_check (this kernel on this CPU
// against the scalar formula, bit for bit) have passed. Int8Tiles::Emulated runs the same kernel
// on the software tile model (tile_model.h) for tests on CPUs without AMX. The epilogue is
// AVX-512 on either unit: both need gemm_q8_available().
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/amx/gemm_bf16_tiles.h"  // TileKernelCheck
#include "ops/matmul/gemm_q8.h"
#include "platform/dtype.h"

namespace g4::ops {

enum class Int8Tiles { None, Amx, Emulated };
const char* int8_tiles_name(Int8Tiles t);  // "none", "AMX-INT8", "software model of AMX-INT8"

// The weight formats the kernel takes: Q8_0_R16 and Q4_0_R16.
bool int8_tiles_take(DType dtype);

// Prefill walks the tokens in blocks and, within a block, the block columns in chunks: each
// 16-row group meets every token tile of a block for one chunk (that chunk of its columns read
// from memory once per block), while the block's activation tiles of the chunk stay in L2. The
// chunk: equal whole blocks of 32 columns, the group's share (~32 bytes a column: Q8_0, or Q4_0
// with its bytes unpacked) at most an eighth of `budget_bytes`; the token block: as many
// 16-token tiles as fit the rest (a byte per column and token), at least 1 and at most 32.
// Budget 0: one tile, all columns. Neither changes a result bit (a later chunk carries each
// token's f32 accumulator on through y, exactly).
struct Int8TileBlocking {
  int64_t token_block = 64;  // a positive multiple of 16
  int64_t k_chunk = 0;       // columns per chunk, a positive multiple of 32; 0: all of them
};
Int8TileBlocking int8_tiles_blocking(int64_t in, uint64_t budget_bytes);

// y[t * ldy + o] for o in [o_begin, o_end), t in [0, a.T): Σ_i a[t, i] · w[o, i], w Q8_0_R16 or
// Q4_0_R16 [out, in], a quantized with the kQ8TokenTiles layout (T > 1). o_begin and o_end are
// multiples of 16; blocking as Int8TileBlocking says; else g4::Error. unit Amx requires
// amx_int8_kernel_usable(); both units require gemm_q8_available().
void gemm_q8_tiles(Int8Tiles unit, const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin,
                   int64_t o_end, float* y, int64_t ldy, Int8TileBlocking blocking = {});

// The one-time check of this kernel on this CPU's AMX-INT8 (item 7 of the fast-path issue). Runs
// once per process, on first use: [37 tokens x 96 columns] x [48 rows] (two full token tiles
// and a partial one, an odd last block column) for Q8_0 and for Q4_0 weights, every output bit
// for bit against the scalar formula on the row-major blocks. Any SIGILL or difference fails it.
const TileKernelCheck& amx_int8_kernel_check();
// host_cpu().amx_int8_usable(), gemm_q8_available() and amx_int8_kernel_check() passed.
bool amx_int8_kernel_usable();

// For tests: the same check on a unit of the caller's choice (Emulated wherever
// gemm_q8_available(); Amx only where the probe confirmed it).
TileKernelCheck check_q8_tiles(Int8Tiles unit);

}  // namespace g4::ops
