// KvCache: per-sequence K/V storage for the Gemma 4 decoder, addressed by absolute position.
//  - a sliding layer that owns KV keeps a ring of R = `sliding_window` + ring_extra_slots slots per
//    sequence, slot = position mod R, and records which position each slot holds (checked on every
//    read);
//  - a full layer that owns KV keeps fixed-size blocks from a shared pool, one block table per
//    sequence, allocated as the sequence grows (nothing reserved for max context up front);
//  - KV-shared layers own nothing: the forward pass reads their source layer;
//  - on K=V layers K and V are stored as the different tensors they are.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_rows.h"
#include "model/config.h"
#include "model/kv_store.h"

namespace g4 {

struct KvCacheOptions {
  KvDType dtype = KvDType::F32;
  int64_t block_tokens = 64;        // full-layer block size
  int64_t max_total_tokens = 1 << 20;  // full-layer capacity summed over sequences (blocks x block_tokens)
  // Ring slots beyond the window. Speculative decoding writes k draft positions and may roll
  // back k of them (truncate): a ring of W slots would have overwritten positions the window
  // still needs. The assistant drafter also reads W + 1 positions. Extra E allows rollbacks of up
  // to E positions with every position the window needs kept.
  int64_t ring_extra_slots = 0;
};

// Bytes of K+V per token, and per sequence at a context length (sliding layers stop at W).
struct KvFootprint {
  uint64_t bytes_per_token = 0;          // every owning layer, as if all positions were kept
  uint64_t sliding_bytes_per_token = 0;  // the sliding layers' share of that
  uint64_t full_bytes_per_token = 0;
  uint64_t bytes_at(int64_t context, int64_t sliding_window) const {
    return sliding_bytes_per_token * uint64_t(std::min<int64_t>(context, sliding_window)) +
           full_bytes_per_token * uint64_t(context);
  }
};
KvFootprint kv_footprint(const ModelConfig& c, KvDType dtype);

// The element type a cache of `t` hands to the attention kernels (KvStore::view_element).
ops::KvElem kv_span_element(KvDType t);

class KvCache : public KvStore {
 public:
  KvCache(const ModelConfig& c, KvCacheOptions o = {});
  ~KvCache() override;

  // A new empty sequence; returns its id. With `history`, sliding layers also keep every
  // position in blocks (beside the ring), so that any prefix of the sequence can later be
  // restored exactly (restore_prefix): what the prefix cache needs.
  int add_sequence(bool history = false);
  void free_sequence(int seq);     // releases its rings and blocks
  // A new sequence holding `seq`'s K/V at every position: the n choices of one request start
  // from one prefill this way. Whole blocks are shared by reference (refcounted; a sequence only
  // ever writes at positions past its length, so a shared block is never written), the partly
  // filled last block and the rings are copied. Throws when the block pool cannot hold the copy.
  int fork_sequence(int seq);
  // Full-layer blocks one sequence of `length` positions holds (0 when no full layer owns KV).
  int64_t blocks_for(int64_t length) const;
  // A new sequence (with history) holding positions [0, m) of `seq`, bit for bit: full layers
  // and sliding layers' history share the blocks wholly below m and copy the one m falls in,
  // and each ring is rebuilt from the history's last `sliding_window` positions, each slot holding the position it would hold had the sequence
  // been fed m tokens from the start. `seq` must have history (or no sliding layer) and
  // 1 <= m <= length(seq). Throws when the block pool cannot hold the copy.
  int restore_prefix(int seq, int64_t m);
  bool has_history(int seq) const;
  uint64_t sequence_bytes(int seq) const;  // every ring, block and history block it holds (shared ones too)
  bool has_sequence(int seq) const { return seqs_.count(seq) != 0; }
  // Can `seq` grow to `new_length` positions without exceeding the block pool?
  bool can_grow(int seq, int64_t new_length) const;
  // Full-layer blocks `seq` still needs to hold `new_length` positions (0 when it has them).
  int64_t blocks_needed(int seq, int64_t new_length) const;
  int64_t free_blocks() const;
  // Forgets positions [new_length, length) of `seq` (speculative rollback): full-layer blocks past
  // the new end are released, the block the new end falls in is made private if shared, ring
  // slots holding forgotten positions are emptied. Throws when a ring would lose a position its
  // window still needs (a rollback longer than ring_extra_slots) or new_length is out of range.
  void truncate(int seq, int64_t new_length);
  int64_t ring_slots() const { return cfg_.sliding_window + opts_.ring_extra_slots; }
  uint64_t bytes_in_use() const;
  const KvCacheOptions& options() const { return opts_; }

  // Benchmarks only: writes deterministic pseudo-random K/V for positions [length, new_length)
  // of every owning layer and commits them, so decode at depth D can be measured without
  // prefilling D tokens. Attention cost depends on the cache length, not on its content.
  void fill_for_benchmark(int seq, int64_t new_length, uint64_t seed);

  int64_t length(int seq) const override;
  void read(int layer, int seq, int64_t begin, int64_t end, float* k, float* v) const override;
  // Spans: a ring gives at most two per call (split where the slots wrap), full layers one per
  // block touched. Every position's ring slot is checked, as in read().
  bool view(int layer, int seq, int64_t begin, int64_t end, std::vector<ops::KvSpan>& out) const override;
  std::optional<ops::KvElem> view_element() const override;
  void write(int layer, int seq, int64_t begin, int64_t n, const float* k, const float* v) override;
  void commit(int seq, int64_t new_length) override;

 private:
  struct Ring {
    KvRows k, v;
    std::vector<int64_t> slot_pos;  // absolute position held by each slot, -1 if empty
  };
  struct Block {
    KvRows k, v;
  };
  struct Sequence {
    int64_t length = 0;
    bool keeps_history = false;
    std::map<int, std::unique_ptr<Ring>> rings;      // sliding owning layer -> ring
    std::map<int, std::vector<int32_t>> block_table;  // full owning layer -> block ids
    std::map<int, std::vector<int32_t>> history;      // sliding owning layer -> block ids (with history)
  };
  const Sequence& seq_or_throw(int seq) const;
  void check_read_range(const Sequence& s, int seq, int64_t begin, int64_t end) const;
  void check_slot(const Ring& r, int layer, int64_t pos) const;
  void ensure_blocks(Sequence& s, int layer, int64_t positions);
  int32_t take_block(int layer);
  void ensure_history(Sequence& s, int layer, int64_t positions);
  // Positions [begin, begin + n) of k, v ([n, kv_heads·head_dim] each) into a block table.
  void write_rows(int layer, const std::vector<int32_t>& table, int64_t begin, int64_t n, const float* k, const float* v);
  // The table holding positions [0, positions) of `table`: blocks wholly below `positions`
  // shared (one more reference), the block `positions` falls inside copied.
  std::vector<int32_t> share_blocks(int layer, const std::vector<int32_t>& table, int64_t positions);
  void release(int layer, int32_t block);  // one reference fewer; free at none
  // Drops table entries past `positions` and makes the one `positions` falls inside private.
  void cut_table(int layer, std::vector<int32_t>& table, int64_t positions);
  int64_t full_blocks_in_use() const;      // distinct blocks of one full owning layer

  const ModelConfig& cfg_;
  KvCacheOptions opts_;
  std::map<int, Sequence> seqs_;
  int next_seq_ = 0;
  // Per full owning layer: all blocks ever made, and the free list.
  std::map<int, std::vector<std::unique_ptr<Block>>> blocks_;
  std::map<int, std::vector<int32_t>> free_;
  std::map<int, std::vector<int32_t>> refs_;  // per layer: references to each block
  int first_full_layer_ = -1;                   // the layer whose blocks count against the pool
};

}  // namespace g4
