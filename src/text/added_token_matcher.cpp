#include "text/added_token_matcher.h"

namespace g4::text {

AddedTokenMatcher::AddedTokenMatcher(const Vocabulary& vocab) {
  nodes_.emplace_back();
  for (int32_t id : vocab.added_token_ids()) {
    const std::string_view text = vocab.piece(id);
    if (text.empty()) continue;
    uint32_t node = 0;
    for (char c : text) {
      const uint8_t b = uint8_t(c);
      uint32_t next = 0;
      for (const auto& [cb, child] : nodes_[node].children)
        if (cb == b) next = child;
      if (next == 0) {
        next = uint32_t(nodes_.size());
        nodes_[node].children.emplace_back(b, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    nodes_[node].token = id;
    first_byte_[uint8_t(text[0])] = true;
  }
}

AddedTokenMatcher::Match AddedTokenMatcher::longest_at(std::string_view text, size_t at) const {
  Match best;
  uint32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const uint8_t b = uint8_t(text[i]);
    uint32_t next = 0;
    for (const auto& [cb, child] : nodes_[node].children)
      if (cb == b) {
        next = child;
        break;
      }
    if (next == 0) break;
    node = next;
    if (nodes_[node].token >= 0) best = Match{at, i + 1, nodes_[node].token};
  }
  return best;
}

AddedTokenMatcher::Match AddedTokenMatcher::next(std::string_view text, size_t from) const {
  if (empty()) return {};
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[uint8_t(text[i])]) continue;
    Match m = longest_at(text, i);
    if (m.id >= 0) return m;
  }
  return {};
}

}  // namespace g4::text
