// SIMD attention for one query row against cached keys and values kept in their stored element
// type (f32, f16, bf16, or int8 with one f32 scale per (position, kv head)), compiled for several
// x86 targets with Highway and dispatched at run time like dot_kernels.
//
// Numerics (the same as ref::attend_row, the reference): scores = q·k with scaling 1.0,
// softmax in f32 with the maximum subtracted, out = Σ p·v, f32 accumulation throughout. Query
// head h reads kv head h / (nH / kvh) (GQA). The softmax runs online over tiles of positions
// (running maximum and sum, earlier partial sums rescaled), so a position range can be split
// between threads and the partial results merged afterwards (attend_merge_finish) with the same
// result up to f32 rounding. exp is Highway's vector Exp (max error 1 ulp on the range used here).
// Tested against the reference loops in tests/ops/attention_test.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

namespace g4::ops {

// Positions per softmax tile (every attention kernel tiles [begin, end) from begin by this).
constexpr int64_t kAttendTile = 128;

// From this head dim the kernels score a tile's keys as kAttendKeyStreams interleaved runs (its
// quarters, each front to back) instead of front to back: more key rows in flight from memory
// (figures in docs/perf.md). Shorter rows stay in order.
constexpr int64_t kAttendKeyStreams = 4, kAttendStreamMinHeadDim = 512;

// Softmax weights below e^kAttendMinWeightExponent (relative to the largest) count as 0: why, in
// attention_kernels.cpp (kMinWeightExponent).
constexpr float kAttendMinWeightExponent = -44.0f;

// Element type of cached K/V rows.
enum class KvElem : uint8_t { F32, F16, BF16, I8 };

// `n` consecutive key positions stored contiguously: K and V are [n, kvh, hd] elements of
// `elem`; for I8, k_scale and v_scale are [n, kvh] (value = scale · q), otherwise unused.
struct KvSpan {
  KvElem elem = KvElem::F32;
  int64_t n = 0;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
};

// Where keys live: the spans in position order; position j of the attention is the j-th
// position counted across all spans.
struct KvSpans {
  const KvSpan* spans = nullptr;
  size_t count = 0;
  int64_t kvh = 0, hd = 0;
};

// The softmax state of `group` query heads that share kv head `kv_head`, over key positions
// [begin, end) (end > begin): o [group, hd] = Σ_j e^(s_j - m) · v_j (unnormalised), m [group]
// the running maximum, l [group] = Σ_j e^(s_j - m). q: [group, hd], those heads' query rows.
// Tiles start at `begin`, so the result (to the bit) depends only on the keys and values of
// [begin, end), not on how they are cut into spans.
void attend_partial(const float* q, int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end,
                    float* o, float* m, float* l);

// Throws g4::Error naming what is wrong unless group >= 1, hd >= 1, 0 <= kv_head < kv.kvh and
// [begin, end) is a non-empty range within the spans' positions (both attention kernels check
// their arguments with it).
void check_attend_args(int64_t group, const KvSpans& kv, int64_t kv_head, int64_t begin, int64_t end);

// out [group, hd] = the attention over the union of `parts` disjoint position ranges, from their
// softmax states as attend_partial leaves them: part j's o [group, hd], m [group], l [group]
// back to back at states + j·stride floats (stride >= group · (hd + 2)). Each part is weighted by
// e^(m_j - max m) (0 for an empty part, l = 0, and below e^kAttendMinWeightExponent) and every
// element sums the parts in the order given, so the result depends only on the parts and their
// order.
// Throws g4::Error when the parts hold no keys or the arguments are bad.
void attend_merge_finish(int64_t group, int64_t hd, const float* states, size_t stride, int64_t parts, float* out);

// out [group, hd] = o / l.
void attend_finish(int64_t group, int64_t hd, const float* o, const float* l, float* out);

// One online-softmax step, as attend_partial takes it (for the int8 kernel, attention_int8.h):
// sc [group, kAttendTile] holds the scores of n (<= kAttendTile) positions; turns them into
// e^(s - m_new) (zero-padded to whole vectors), rescales o [group, hd] and l by e^(m_old - m_new)
// and adds the weights to l.
void softmax_tile(float* sc, int64_t group, int64_t n, int64_t hd, float* o, float* m, float* l);

// One online-softmax step (for the bf16 kernel, attention_bf16.h): sc [group, kAttendTile]
// holds the scores of n (<= kAttendTile) positions; turns them into e^(s - m_new) rounded to
// bf16 (stored as f32, zero-padded to whole vectors), rescales o [group, hd] and l by
// e^(m_old - m_new) and adds the rounded weights to l.
void softmax_tile_bf16(float* sc, int64_t group, int64_t n, int64_t hd, float* o, float* m, float* l);

// One query row q [nH, hd] against positions [begin, end) of kv, all heads, on the calling
// thread: out [nH, hd]. nH must be a multiple of kv.kvh.
void attend_row(const float* q, int64_t nH, const KvSpans& kv, int64_t begin, int64_t end, float* out);

}  // namespace g4::ops
