// Finds added tokens (<bos>, <|turn>, "\n\n", <unused7>, ...) in raw text before BPE, the way
// Hugging Face does: scanning left to right, at the first position where any added token starts,
// take the longest one that matches there (leftmost-longest). A byte trie over the token texts.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace g4::text {

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const Vocabulary& vocab);

  struct Match {
    size_t begin = 0, end = 0;  // byte range in the text
    int32_t id = -1;            // -1: no added token in the rest of the text
  };
  // The leftmost-longest added token at or after byte `from`.
  Match next(std::string_view text, size_t from) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    int32_t token = -1;  // id of the token that ends here
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (byte, node index), few per node
  };
  // Longest token starting at text[at]: (end, id) or id -1.
  Match longest_at(std::string_view text, size_t at) const;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};  // quick reject for positions where no token starts
};

}  // namespace g4::text
