#include "text/piece_index.h"

#include <algorithm>
#include <bit>

namespace g4::text {

PieceIndex::PieceIndex(size_t capacity_hint) {
  const size_t cap = std::bit_ceil(std::max<size_t>(16, capacity_hint * 2));
  slots_.assign(cap, kEmpty);
  mask_ = cap - 1;
}

bool PieceIndex::insert(std::string_view text, int32_t id, const std::vector<std::string_view>& pieces,
                        int32_t* existing) {
  const uint64_t h = hash(text);
  const uint32_t tag = uint32_t(h >> 32);
  for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
    const uint64_t s = slots_[i];
    if (s == kEmpty) {
      slots_[i] = (uint64_t(tag) << 32) | uint32_t(id);
      return true;
    }
    if (uint32_t(s >> 32) == tag && pieces[size_t(uint32_t(s))] == text) {
      if (existing) *existing = int32_t(uint32_t(s));
      return false;
    }
  }
}

}  // namespace g4::text
