// The encoder-output cache: soft tokens of recently encoded images, so an image sent again (turn
// N of an image chat, another user's copy) skips the vision tower even when the prefix cache
// missed it (evicted, or the conversation diverged before the image). Entries are looked up by
// PromptImage::key and then compared in full (pixels, positions, grid) against the input they were
// encoded from: a hash collision is a miss, never another image's tokens. Bounded by bytes, least
// recently used out first. Engine thread only.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/prompt_images.h"

namespace g4 {

using SoftRows = std::vector<float>;  // [S, H]: an image's soft tokens

// Whether two images give the tower the same input (the span, where they sit, does not count).
bool same_tower_input(const PromptImage& a, const PromptImage& b);

class ImageEncoderCache {
 public:
  explicit ImageEncoderCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The soft tokens encoded from an input equal to `img`'s, or null; a hit becomes the most
  // recent entry. The rows stay alive while any sequence holds them, evicted or not.
  std::shared_ptr<const SoftRows> find(const PromptImage& img);
  // Keeps `rows` for `img`'s input (the image itself is held, to compare later lookups against),
  // then drops the least recent entries until the budget holds. An entry larger than the whole
  // budget is not kept.
  void insert(std::shared_ptr<const PromptImage> img, std::shared_ptr<const SoftRows> rows);

  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return lru_.size(); }

 private:
  struct Entry {
    std::shared_ptr<const PromptImage> input;
    std::shared_ptr<const SoftRows> rows;
    uint64_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recent first
  void drop(Lru::iterator it);

  uint64_t max_bytes_, bytes_ = 0;
  Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> by_key_;
};

}  // namespace g4
