// A layer's attention in the cached, batched pass (forward_cached.h): every row of the step
// attends over the keys its sequence has cached (a KvStore, by absolute position) followed by
// the step's own rows of that sequence up to itself; sliding layers keep keys with q - k <
// window. This file owns the kernel choice: the reference loops (f32 keys gathered), or on the
// SIMD path the kernel for the element type the store keeps (f32 FMA, VDPBF16PS, AMX-BF16
// tiles, VPDPBUSD), with the work cut into fixed slices so no batch, chunking or thread count
// changes a bit.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/executor.h"
#include "model/kv_store.h"
#include "model/model.h"

namespace g4 {

// Consecutive rows [row_begin, row_end) of one sequence within a step, from position pos_begin.
struct RowGroup {
  int seq;
  size_t row_begin, row_end;
  int64_t pos_begin;
};

// a [T, nH, hd] for layer `layer`, reading the cache of its KV source layer (itself unless
// KV-shared): q [T, nH, hd], the step's own k, v of that layer [T, kvh, hd], positions [T].
// sliding_key_ends [T] (model/soft_tokens.h), when not empty: the last position each row sees
// on a sliding layer, at or past its own (an image's rows under the "vision" rule), always
// within the step's rows of its sequence. Empty, and on full layers: causal.
void attend_from_cache(const Model& m, int layer, const KvStore& kv, const std::vector<RowGroup>& groups,
                       const std::vector<int64_t>& positions, const std::vector<int64_t>& sliding_key_ends,
                       const blocks::Vec& q, const blocks::Vec& k, const blocks::Vec& v, blocks::Vec& a,
                       const blocks::Exec& ex);

// True when the SIMD pass (ex.matmul set) attends with the bf16 kernel (ops/attention/attention_bf16.h):
// policy compute = bf16 (ex.matmul->bf16_compute), a store whose views hold bf16, and a CPU
// that confirmed AVX512_BF16. Otherwise it uses the f32 kernel (ops/attention/attention_kernels.h).
bool uses_bf16_attention(const KvStore& kv, const blocks::Exec& ex);
// True when the SIMD pass attends with the int8 kernel (ops/attention/attention_int8.h): policy
// activations = q8 (ex.matmul->int8_activations), a store whose views hold int8, and a CPU that
// confirmed AVX512_VNNI. The step's own K/V rows are then quantized as the cache will store them.
bool uses_int8_attention(const KvStore& kv, const blocks::Exec& ex);
// What the SIMD pass's attention executes over a store viewing `elem` elements, in words (for
// bench and the server): nullopt elem means a store without views.
std::string describe_attention(std::optional<ops::KvElem> elem, const blocks::Exec& ex);

}  // namespace g4
