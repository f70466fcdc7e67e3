// Decode and prefill attention over an int8 K/V cache (one f32 scale per (position, kv head)) on
// AVX512_VNNI: the kernel the cached forward pass uses when the KV cache stores int8 and the
// dtype policy quantizes activations to int8 (activations = q8) on a CPU whose VNNI the probe
// and its self-test confirmed. Why: at depth, decode attention is bound by multiply-adds, not by
// memory (a VM's vCPUs may share one core's FMA units), and one VPDPBUSD does 64
// int8 multiply-adds where an f32 FMA over widened keys does 16.
//
// Numerics, against attend_partial (f32 queries against the widened int8 keys):
//  - each query row (one head, hd values) is quantized once per call with the cache's own rule
//    (quantize_int8_symmetric, platform/quantize_int8.h): scale_q = max|q| / 127, q8 = q / scale_q
//    rounded to nearest even;
//  - score = (scale_q · scale_k) · Σ q8·k8, the sum exact in int32 (VPDPBUSD over k8 + 128 as
//    unsigned bytes, minus 128 · Σ q8), converted to f32 (exact for hd <= 1040), one f32 product;
//  - the online softmax is attend_partial's (softmax_tile, tiles of kAttendTile positions from
//    `begin`), and out = Σ p · scale_v · v8 in f32 FMA, positions in order, as there.
// So the only new error is the query's rounding: |Δscore| <= scale_q / 2 · Σ|k|. A position's
// rows are found through the spans one by one, so the result (to the bit) depends only on the
// keys and values of [begin, end), never on how a cache or a batch cut them into spans. Tested
// against a double-precision evaluation of the same quantized operands and against the f32
// kernel within that bound (tests/ops/attention_int8_test.cpp).
#pragma once
#include <cstdint>

#include "ops/attention/attention_kernels.h"

namespace g4::ops {

// True when this build has the kernel and the CPU confirmed AVX512_VNNI (probe + self-test).
bool attention_int8_available();

// As attend_partial, for spans whose elements are all KvElem::I8. Throws g4::Error on other
// element types, bad arguments (check_attend_args), a head dim above 1040, or when
// attention_int8_available() is false.
void attend_partial_int8(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                         float* o, float* m, float* l);

}  // namespace g4::ops
