// BPE merge rules keyed by the id pair they join: (left_id, right_id) -> (rank, merged_id).
// Open addressing over a power-of-two table: Gemma has 514,906 merges, and the BPE inner loop
// does one lookup per adjacent pair, so this avoids a node allocation per rule and a pointer
// chase per lookup that std::unordered_map would cost.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace g4::text {

struct MergeRule {
  uint32_t rank;      // position in the file's merges list; lower merges first
  int32_t merged_id;  // id of the piece left+right
};

class MergeTable {
 public:
  MergeTable() = default;
  explicit MergeTable(size_t expected_rules);

  // Later insertions of the same pair replace earlier ones (as a map built from the list does).
  void insert(int32_t left, int32_t right, MergeRule rule);
  // nullptr when the pair never merges.
  const MergeRule* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.rule;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    MergeRule rule;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t pack(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_; }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace g4::text
