// Decode and prefill attention over a bf16 K/V cache on AVX512_BF16 (VDPBF16PS): the kernel the
// cached forward pass uses when the dtype policy resolves compute = bf16 and the KV cache stores
// bf16. Each VDPBF16PS does 32 multiply-adds where an f32 FMA over widened keys does 16, and the
// keys need no widening at all.
//
// Numerics, against attend_partial (attention_kernels.h, f32 operands throughout):
//  - the query rows are rounded to bf16 (ties to even) once per call; scores = Σ q·k with f32
//    accumulation over pairs of elements (VDPBF16PS), each sum reduced in one fixed order;
//  - the softmax is the same online softmax in f32 (tiles of kAttendTile positions from
//    `begin`), except that every weight e^(s - m) is rounded to bf16 before it multiplies a
//    value row and before it is added to l, so out = Σ p·v / Σ p with the same p in both;
//  - out accumulates Σ p·v in f32 over pairs of positions (position 2j with 2j + 1 of the tile).
// Pairs are counted from the tile's first position and a position's row is found through the
// spans one by one, so the result (to the bit) depends only on the keys and values of
// [begin, end), never on how a cache or a batch cut them into spans. Tested against a
// double-precision evaluation of the same rounded operands (tests/ops/attention_bf16_test.cpp).
#pragma once
#include <cstdint>

#include "ops/attention/attention_kernels.h"

namespace g4::ops {

// True when this build has the kernel and the CPU confirmed AVX512_BF16 (probe + self-test).
bool attention_bf16_available();

// krow[j], vrow[j] = kv head kv_head's bf16 key and value rows of position begin + j, for j in
// [0, end - begin): each position found through the spans one by one (the bf16 kernels' shared
// way of reading a cache, so neither depends on how it was cut). Arguments already checked.
void find_bf16_rows(const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end, const uint16_t** krow,
                    const uint16_t** vrow);

// As attend_partial, for spans whose elements are all KvElem::BF16. Throws g4::Error on other
// element types, bad arguments, or when attention_bf16_available() is false.
void attend_partial_bf16(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                         float* o, float* m, float* l);

}  // namespace g4::ops
