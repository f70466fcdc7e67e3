// PrefixCache: the KV of finished sequences, kept so that a later request whose prompt starts
// with the same tokens prefills only the rest. Chat clients resend the whole conversation every
// turn and agents resend the same system prompt and tools; without this every request prefills
// from token 0.
//
// How a hit stays exact. An entry is a KvCache sequence kept with history (kv_cache.h): full
// layers hold every position in blocks as always, and sliding layers keep every position in
// history blocks beside their ring. A hit of m tokens restores positions [0, m) into a new
// sequence (KvCache::restore_prefix): blocks shared by reference (the one m falls in is
// copied), the ring rebuilt from the history's last
// `sliding_window` positions, each slot holding the absolute position it holds in a cold run.
// The values are the stored bits of the same computation, so the logits after a hit are those
// of the cold run (tested bit for bit). KV-shared layers own nothing and follow their source.
// A ring alone could not do this: once a sequence runs past the window, the positions a shorter
// prefix needs have been overwritten.
//
// Granularity is the token: any common prefix of at least `min_tokens` counts, up to the prompt's
// length - 1 (its last token is always fed, to produce the logits). Memory is bounded by `budget_bytes`
// (least recently used entries go first; an entry's bytes count the blocks it shares with
// others, so the budget errs safe). Blocks are refcounted, so evicting an entry never takes a
// block a running sequence holds. Not thread-safe: the engine thread owns it.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv_cache.h"

namespace g4 {

struct PrefixCacheStats {
  int64_t hit_tokens = 0;   // prompt tokens served from the cache
  int64_t miss_tokens = 0;  // prompt tokens prefilled (with the cache on)
  int64_t hits = 0, lookups = 0;
  int64_t evictions = 0;
  int64_t entries = 0;
  uint64_t bytes = 0;       // KV the entries hold
};

class PrefixCache {
 public:
  PrefixCache(KvCache& kv, uint64_t budget_bytes, int64_t min_tokens = 16);
  ~PrefixCache();  // frees every entry's sequence

  // Takes the finished sequence `kv_seq` (with history) whose cache holds `tokens`, one per
  // position. An entry it extends is dropped; if an entry already covers it, it is freed.
  // Evicts down to the budget.
  void insert(std::vector<int> tokens, int kv_seq);

  struct Hit {
    int kv_seq = -1;     // a new sequence holding the prompt's first `tokens` positions
    int64_t tokens = 0;  // 0: no hit (kv_seq -1)
  };
  // The longest cached prefix of `prompt` (at most prompt.size() - 1 tokens), restored into a
  // new sequence. Counts hit and miss tokens. A hit the block pool cannot hold is no hit.
  Hit lookup(const std::vector<int>& prompt);

  // Drops the least recently used entry; false when there is none.
  bool evict_one();
  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::vector<int> tokens;
    int kv_seq = -1;
    uint64_t bytes = 0;
    uint64_t last_used = 0;
  };
  void drop(size_t i);

  KvCache& kv_;
  uint64_t budget_;
  int64_t min_tokens_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace g4
