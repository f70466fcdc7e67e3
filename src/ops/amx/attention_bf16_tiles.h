// Decode and prefill attention over a bf16 K/V cache on AMX-BF16 tiles (TDPBF16PS): the kernel
// the cached forward pass uses under compute = bf16 with a bf16 cache once the CPU's tiles and
// this kernel's check have passed. One call serves one query row's `group` heads (the heads that
// share a kv head: 8 for E2B), so decode and prefill run the same arithmetic per row.
//
// The two products, per 32 keys and 32 columns of the head dim:
//  - scores, transposed: Sᵀ [16 positions, group] += K [16 positions, 32 dims] · Qᵀ: the key rows
//    are loaded straight from the cache as the A operand (one 64-byte slice per position, the
//    cache's row stride), the bf16-rounded query rows laid out once per call as B tiles (pairs of
//    dims x heads). Keys that do not lie 16 in a row in one span (span edges, a short last block)
//    are copied into a staging tile first: same bytes, same products.
//  - values: O [group, 16 dims] += P [group, 32 positions] · V, the weights P as A (bf16 rows of
//    the softmax tile), the value rows interleaved in pairs of positions (the VNNI B layout:
//    unpacklo/hi of two rows, so the 32 dims of a block land in the order {0-3, 8-11, 16-19,
//    24-27} and {4-7, ..., 28-31} across two tiles; the accumulator is kept in that order during
//    the call and put back at its end).
//
// Numerics (the spec the tests hold it to; on the software model, tile_model.h, exactly these):
//  - queries rounded to bf16 once per call; a score is a sum from 0 over the head dim in steps of
//    32, each step one TDPBF16PS element (pairs in order, even then odd product, f32);
//  - the online softmax is softmax_tile_bf16 (tiles of kAttendTile positions from `begin`,
//    weights rounded to bf16, l sums the rounded weights), as in the VDPBF16PS kernel;
//  - o is rescaled by the softmax step, then takes each block of 32 positions in order, one
//    TDPBF16PS element per block (pairs of positions in order).
// Every element of a tile product depends only on its own row and column, and position j's rows
// are found through the spans one by one, so the result (to the bit) depends only on the keys and
// values of [begin, end), never on how a cache or a batch cut them into spans or which other rows
// a step holds. It differs from the VDPBF16PS kernel's by summation order only (within the same
// double-precision bound): a model runs one of the two for every row of a layer, never a mixture.
#pragma once
#include <cstdint>

#include "ops/attention/attention_kernels.h"
#include "ops/amx/gemm_bf16_tiles.h"  // Bf16Tiles, TileKernelCheck

namespace g4::ops {

// Whether a kv head's rows run on the tiles: 1..16 heads per kv head (one tile's rows or
// columns) and a head dim in whole steps of 32 (a 64-byte tile row). Other layers take the
// VDPBF16PS kernel for every row.
bool attention_tiles_fit(int64_t group, int64_t hd);

// As attend_partial_bf16 (bf16 spans only), on `unit`'s tiles. Throws g4::Error on other element
// types, bad arguments (check_attend_args), a shape attention_tiles_fit refuses, unit None, unit
// Amx without amx_attention_kernel_usable(), or a CPU without AVX512_BF16 (the softmax and the
// staging run on AVX-512).
void attend_partial_bf16_tiles(Bf16Tiles unit, const float* q, int64_t group, const KvSpans& kv, int64_t kv_head,
                               int64_t begin, int64_t end, float* o, float* m, float* l);

// The one-time check of this kernel on this CPU's tiles (item 7 of the fast-path issue), on first
// use: 8 heads x head dim 64 over 300 keys cut into spans of uneven lengths, against a
// double-precision evaluation of the same rounded operands (2^-8 on values in [-1, 1]), and the
// same keys in one span and in ranges cut elsewhere bit for bit. Any SIGILL, mismatch or
// difference fails it, and the forward pass keeps VDPBF16PS.
const TileKernelCheck& amx_attention_kernel_check();
// amx_bf16_kernel_usable() (probe, self-test, product kernel check) and the check above passed.
bool amx_attention_kernel_usable();
// For tests: the same check on a unit of the caller's choice (Emulated anywhere with
// AVX512_BF16; Amx only where the probe confirmed it).
TileKernelCheck check_attention_tiles(Bf16Tiles unit);

}  // namespace g4::ops
