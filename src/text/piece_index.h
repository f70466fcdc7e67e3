// piece text -> id, for a vocabulary whose pieces live in one arena. Open addressing with the
// hash and id packed in 8 bytes per slot: loading Gemma resolves ~1.5M merge parts, and a
// node-based std::unordered_map spent most of the load time in cache misses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace g4::text {

class PieceIndex {
 public:
  PieceIndex() = default;
  explicit PieceIndex(size_t capacity_hint);

  // pieces[id] must outlive the index (they are compared on lookup). Returns false when the
  // text is already present (then *existing is its id).
  bool insert(std::string_view text, int32_t id, const std::vector<std::string_view>& pieces, int32_t* existing);
  int32_t find(std::string_view text, const std::vector<std::string_view>& pieces) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(text);
    const uint32_t tag = uint32_t(h >> 32);
    for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return -1;
      if (uint32_t(s >> 32) == tag) {
        const int32_t id = int32_t(uint32_t(s));
        if (pieces[size_t(id)] == text) return id;
      }
    }
  }

  static uint64_t hash(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull ^ s.size();  // FNV-1a, then a final mix
    for (char c : s) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::vector<uint64_t> slots_;  // (hash high 32 bits << 32) | id
  size_t mask_ = 0;
};

}  // namespace g4::text
