#include <algorithm>

#include "engine/drafter.h"

namespace g4 {

std::vector<int> NgramDrafter::propose(const DraftContext& c, int k) {
  // Rebuilt each call (a copy of at most the context, small beside one forward step).
  seq_.assign(c.prompt.begin(), c.prompt.end());
  seq_.insert(seq_.end(), c.generated.begin(), c.generated.end());
  seq_.push_back(c.pending);
  const int64_t L = int64_t(seq_.size());
  if (k <= 0) return {};
  for (int n = std::min<int64_t>(max_n_, L - 1); n >= min_n_; --n) {
    const int* key = &seq_[size_t(L - n)];
    // The latest earlier occurrence whose continuation lies inside the sequence.
    for (int64_t start = L - n - 1; start >= 0; --start) {
      if (!std::equal(key, key + n, &seq_[size_t(start)])) continue;
      // What followed it, up to k tokens; where that reaches the end of the sequence the
      // proposal repeats with the period L - from (a loop continues as it went).
      const int64_t from = start + n, period = L - from;
      std::vector<int> d;
      for (int64_t i = 0; i < k; ++i) d.push_back(i < period ? seq_[size_t(from + i)] : d[size_t(i - period)]);
      return d;
    }
  }
  return {};
}

std::vector<int> ReplayDrafter::propose(const DraftContext& c, int k) {
  const size_t g = c.generated.size();
  if (g >= script_.size() || !std::equal(c.generated.begin(), c.generated.end(), script_.begin()) || script_[g] != c.pending)
    return {};
  const size_t from = g + 1, n = std::min(script_.size() - from, size_t(std::max(k, 0)));
  return std::vector<int>(script_.begin() + ptrdiff_t(from), script_.begin() + ptrdiff_t(from + n));
}

uint64_t RandomDrafter::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<int> RandomDrafter::propose(const DraftContext&, int k) {
  std::vector<int> d(size_t(std::max(k, 0)));
  if (vary_) d.resize(size_t(next() % uint64_t(std::max(k, 0) + 1)));
  for (int& t : d) t = int(next() % uint64_t(vocab_));
  return d;
}

}  // namespace g4
