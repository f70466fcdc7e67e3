#include "engine/image_cache.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace g4 {

namespace {

// What an entry costs: the tower input it keeps for comparison and the soft rows.
uint64_t entry_bytes(const PromptImage& img, const SoftRows& rows) {
  return (img.pixel_values.size() + rows.size()) * sizeof(float) + img.positions.size() * sizeof(int32_t);
}

}  // namespace

bool same_tower_input(const PromptImage& a, const PromptImage& b) {
  return a.grid_rows == b.grid_rows && a.grid_cols == b.grid_cols && a.positions == b.positions &&
         a.pixel_values.size() == b.pixel_values.size() &&
         // Bitwise, as the key hashes them (a -0.0 and 0.0 pixel are different inputs to it).
         std::equal(a.pixel_values.begin(), a.pixel_values.end(), b.pixel_values.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof x) == 0;
         });
}

std::shared_ptr<const SoftRows> ImageEncoderCache::find(const PromptImage& img) {
  const auto [b, e] = by_key_.equal_range(img.key);
  for (auto it = b; it != e; ++it) {
    if (!same_tower_input(*it->second->input, img)) continue;  // a collision of the 64-bit key
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->rows;
  }
  return nullptr;
}

void ImageEncoderCache::insert(std::shared_ptr<const PromptImage> img, std::shared_ptr<const SoftRows> rows) {
  const uint64_t n = entry_bytes(*img, *rows);
  if (n > max_bytes_ || find(*img)) return;
  const uint64_t key = img->key;
  lru_.push_front({std::move(img), std::move(rows), n});
  by_key_.emplace(key, lru_.begin());
  bytes_ += n;
  while (bytes_ > max_bytes_) drop(std::prev(lru_.end()));
}

void ImageEncoderCache::drop(Lru::iterator it) {
  const auto [b, e] = by_key_.equal_range(it->input->key);
  for (auto k = b; k != e; ++k)
    if (k->second == it) {
      by_key_.erase(k);
      break;
    }
  bytes_ -= it->bytes;
  lru_.erase(it);
}

}  // namespace g4
