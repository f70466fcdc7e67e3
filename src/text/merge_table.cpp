#include "text/merge_table.h"

#include <algorithm>
#include <bit>

namespace g4::text {

MergeTable::MergeTable(size_t expected_rules) {
  // Load factor <= 0.75 (Gemma: 515k rules in 1M slots, 16 MB).
  const size_t cap = std::bit_ceil(std::max<size_t>(16, expected_rules + expected_rules / 2));
  slots_.assign(cap, Slot{kEmpty, {0, 0}});
  mask_ = cap - 1;
  shift_ = unsigned(64 - std::countr_zero(cap));
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  *this = MergeTable(old.empty() ? 16 : old.size());
  for (const Slot& s : old)
    if (s.key != kEmpty) insert(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.rule);
}

void MergeTable::insert(int32_t left, int32_t right, MergeRule rule) {
  if ((size_ + 1) * 4 > slots_.size() * 3) grow();
  const uint64_t key = pack(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.rule = rule;
      return;
    }
    if (s.key == kEmpty) {
      s = Slot{key, rule};
      ++size_;
      return;
    }
  }
}

}  // namespace g4::text
