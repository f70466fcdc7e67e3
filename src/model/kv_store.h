// KvStore: what the cached forward pass needs from a KV cache, by absolute token position.
// The engine implements it (rings for sliding layers, block tables for full layers); the model
// layer only sees positions, never slots, so no cache layout can shift a position.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/attention/attention_kernels.h"

namespace g4 {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // Positions [0, length) of `seq` are committed; the next token of `seq` is at position length.
  virtual int64_t length(int seq) const = 0;
  // Copies K and V of positions [begin, end) of `seq` at owning layer `layer` into k and v
  // ([end - begin, kvh, hd] f32 each). A sliding layer retains only its last `sliding_window`
  // committed positions; asking for older ones is a logic error and throws.
  virtual void read(int layer, int seq, int64_t begin, int64_t end, float* k, float* v) const = 0;
  // The same positions without copying: appends to `out`, in position order, spans of
  // consecutive positions whose K and V rows lie contiguously in the store, in its own element
  // type (ops::KvSpan: f32, f16, bf16, or int8 with a scale per (position, kv head)); together
  // they cover exactly [begin, end). The same rules and checks as read(): every position is
  // checked against the absolute position its slot holds, and older positions of a sliding layer
  // throw. The spans point into the store and stay valid until the next write, commit or
  // sequence change. Returns false (appending nothing) when the store has no such form; callers
  // then use read(). The SIMD forward pass attends over these spans directly.
  virtual bool view(int layer, int seq, int64_t begin, int64_t end, std::vector<ops::KvSpan>& out) const {
    (void)layer, (void)seq, (void)begin, (void)end, (void)out;
    return false;
  }
  // The element type view() spans hold (the same for every layer, position and sequence), or
  // nullopt when the store has no views. The SIMD pass picks its attention kernel from this, so
  // a step's own rows and the cached rows take the same path whatever is cached yet.
  virtual std::optional<ops::KvElem> view_element() const { return std::nullopt; }
  // Stores K and V rows for positions [begin, begin + n) of `seq` at owning layer `layer`
  // (k, v: [n, kvh, hd] f32). Called after the whole forward step has read what it needs.
  virtual void write(int layer, int seq, int64_t begin, int64_t n, const float* k, const float* v) = 0;
  // Marks positions [0, new_length) of `seq` committed (after every owning layer was written).
  virtual void commit(int seq, int64_t new_length) = 0;
};

}  // namespace g4
