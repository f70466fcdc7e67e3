#include "engine/prefix_cache.h"

#include <algorithm>

#include "platform/error.h"

namespace g4 {
namespace {

int64_t common_prefix(const std::vector<int>& a, const std::vector<int>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return int64_t(i);
}

}  // namespace

PrefixCache::PrefixCache(KvCache& kv, uint64_t budget_bytes, int64_t min_tokens)
    : kv_(kv), budget_(budget_bytes), min_tokens_(std::max<int64_t>(1, min_tokens)) {}

PrefixCache::~PrefixCache() {
  for (const Entry& e : entries_) kv_.free_sequence(e.kv_seq);
}

void PrefixCache::drop(size_t i) {
  kv_.free_sequence(entries_[i].kv_seq);
  stats_.bytes -= entries_[i].bytes;
  entries_.erase(entries_.begin() + std::ptrdiff_t(i));
  stats_.entries = int64_t(entries_.size());
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  size_t oldest = 0;
  for (size_t i = 1; i < entries_.size(); ++i)
    if (entries_[i].last_used < entries_[oldest].last_used) oldest = i;
  drop(oldest);
  ++stats_.evictions;
  return true;
}

void PrefixCache::insert(std::vector<int> tokens, int kv_seq) {
  if (int64_t(tokens.size()) != kv_.length(kv_seq))
    throw Error("prefix cache: " + std::to_string(tokens.size()) + " tokens for a sequence of " +
                std::to_string(kv_.length(kv_seq)) + " positions");
  if (!kv_.has_history(kv_seq) || int64_t(tokens.size()) < min_tokens_) {
    kv_.free_sequence(kv_seq);
    return;
  }
  for (size_t i = 0; i < entries_.size();) {
    const int64_t same = common_prefix(entries_[i].tokens, tokens);
    if (same == int64_t(tokens.size())) {  // already covered: keep the longer one, touch it
      entries_[i].last_used = ++clock_;
      kv_.free_sequence(kv_seq);
      return;
    }
    if (same == int64_t(entries_[i].tokens.size())) {
      drop(i);  // the new entry extends it
      continue;
    }
    ++i;
  }
  Entry e;
  e.tokens = std::move(tokens);
  e.kv_seq = kv_seq;
  e.bytes = kv_.sequence_bytes(kv_seq);
  e.last_used = ++clock_;
  stats_.bytes += e.bytes;
  entries_.push_back(std::move(e));
  stats_.entries = int64_t(entries_.size());
  while (stats_.bytes > budget_ && evict_one()) {
  }
}

PrefixCache::Hit PrefixCache::lookup(const std::vector<int>& prompt) {
  ++stats_.lookups;
  const int64_t limit = int64_t(prompt.size()) - 1;  // the last prompt token is always fed, for its logits
  size_t best = entries_.size();
  int64_t best_len = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int64_t m = std::min(common_prefix(entries_[i].tokens, prompt), limit);
    if (m > best_len) best = i, best_len = m;
  }
  Hit hit;
  // A restore takes at most one new block per full layer (the one the prefix ends inside), which
  // the engine's admission has made room for; a pool that still cannot give it is no hit.
  if (best < entries_.size() && best_len >= min_tokens_) {
    try {
      hit.kv_seq = kv_.restore_prefix(entries_[best].kv_seq, best_len);
      hit.tokens = best_len;
      entries_[best].last_used = ++clock_;
      ++stats_.hits;
    } catch (const Error&) {
    }
  }
  stats_.hit_tokens += hit.tokens;
  stats_.miss_tokens += int64_t(prompt.size()) - hit.tokens;
  return hit;
}

}  // namespace g4
