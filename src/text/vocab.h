// Vocabulary: everything a BPE tokenizer file says about its tokens, independent of the file
// format. Filled from a Hugging Face tokenizer.json (tokenizer_json.h) today and from a GGUF's
// tokenizer.ggml.* arrays later: both give pieces by id, token types, optional scores, merges as
// piece pairs in rank order, and the special tokens by name or id. VocabularySpec is that common
// shape; Vocabulary validates it once and builds the lookup tables the tokenizer needs.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/merge_table.h"
#include "text/piece_index.h"

namespace g4::text {

// Merge rules in rank order, stored compactly: Gemma has 515k, and a vector of string pairs
// (64 bytes each) cost more in page faults than the rest of loading.
class MergeList {
 public:
  void add(std::string_view left, std::string_view right) {
    text_.append(left);
    bounds_.push_back(uint32_t(text_.size()));
    text_.append(right);
    bounds_.push_back(uint32_t(text_.size()));
  }
  void reserve(size_t merges, size_t bytes) {
    bounds_.reserve(merges * 2);
    text_.reserve(bytes);
  }
  size_t size() const { return bounds_.size() / 2; }
  std::string_view left(size_t r) const { return span(r == 0 ? 0 : bounds_[2 * r - 1], bounds_[2 * r]); }
  std::string_view right(size_t r) const { return span(bounds_[2 * r], bounds_[2 * r + 1]); }

 private:
  std::string_view span(uint32_t b, uint32_t e) const { return std::string_view(text_).substr(b, e - b); }
  std::string text_;              // left + right of every merge, back to back
  std::vector<uint32_t> bounds_;  // per merge: end of left, end of right
};

// Values match GGUF's tokenizer.ggml.token_type so a GGUF array can be cast directly.
enum class TokenType : uint8_t {
  Normal = 1,       // ordinary BPE piece
  Unknown = 2,      // <unk>
  Control = 3,      // special added token (<bos>, <|turn>, ...): matched in raw text, skippable on decode
  UserDefined = 4,  // non-special added token (<unused0>, "\n\n", <table>): matched in raw text
  Unused = 5,       // reserved slot (GGUF); never produced by BPE
  Byte = 6,         // <0xNN> byte-fallback piece
};

// What a tokenizer file provides, before validation. Ids are dense: pieces[id] for 0..size-1.
struct VocabularySpec {
  std::string source;                // file name for error messages
  std::vector<std::string> pieces;   // id -> piece text; spaces are U+2581 in pieces
  std::vector<TokenType> types;      // id -> type; same length as pieces
  std::vector<float> scores;         // id -> score (GGUF/SentencePiece); empty when the file has none
  MergeList merges;                  // rank order: merge r joins merges.left(r) + merges.right(r)
  std::vector<int32_t> added_token_ids;  // matched in the raw text before BPE (any order)
  std::string unk_piece;             // "" when the model has no unknown token
  bool byte_fallback = true;         // unknown characters become <0xNN> pieces
  bool fuse_unk = true;              // consecutive unknowns become one <unk>
  bool space_to_metaspace = true;    // the normalizer: " " -> U+2581 before BPE
  bool add_bos = false;              // tokenizer_config add_bos_token (what `encode(add_bos)` defaults mean)
  // Role -> piece, as tokenizer_config.json names them ("bos_token" -> "<bos>",
  // "eot_token" -> "<turn|>"). Only names actually in the files; nothing is assumed.
  std::map<std::string, std::string> named_tokens;
};

class Vocabulary {
 public:
  Vocabulary() = default;
  // Move-only: pieces_ and piece_to_id_ view into piece_arena_.
  Vocabulary(Vocabulary&&) = default;
  Vocabulary& operator=(Vocabulary&&) = default;
  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;
  // Validates (dense ids, unique pieces, merge parts and results in the vocabulary, named tokens
  // present) and builds the lookup tables. Throws g4::Error naming spec.source and the bad item.
  explicit Vocabulary(VocabularySpec spec);

  int32_t size() const { return int32_t(pieces_.size()); }
  std::string_view piece(int32_t id) const { return pieces_[size_t(id)]; }
  TokenType type(int32_t id) const { return types_[size_t(id)]; }
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[size_t(id)]; }
  bool valid_id(int32_t id) const { return id >= 0 && id < size(); }
  // -1 when the piece is not in the vocabulary.
  int32_t find(std::string_view piece) const {
    return piece_to_id_.find(piece, pieces_);
  }
  // The byte-fallback piece for byte b (<0xNN>), or -1.
  int32_t byte_id(uint8_t b) const { return byte_ids_[b]; }
  // 0..255 when id is a <0xNN> byte piece, else -1.
  int byte_value(int32_t id) const { return byte_value_[size_t(id)]; }

  const MergeTable& merges() const { return merges_; }
  size_t merge_count() const { return merge_count_; }
  const std::vector<int32_t>& added_token_ids() const { return added_token_ids_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool byte_fallback() const { return byte_fallback_; }
  bool fuse_unk() const { return fuse_unk_; }
  bool space_to_metaspace() const { return space_to_metaspace_; }
  bool add_bos() const { return add_bos_; }
  const std::string& source() const { return source_; }

  // The piece a tokenizer_config role names ("bos_token", "eos_token", "eot_token", ...), if any.
  std::optional<std::string> named_piece(const std::string& role) const;
  const std::map<std::string, std::string>& named_tokens() const { return named_tokens_; }

  // Id of a special token by its piece text, refusing what would silently be wrong: a piece that
  // is missing, or that is the unknown token (use unk_id() for that one).
  // Returns nullopt and sets *why (if given) to a sentence naming the piece and the file.
  std::optional<int32_t> special_id(std::string_view piece, std::string* why = nullptr) const;
  // Same, but throws g4::Error with that sentence (`purpose` says what the token was needed for).
  int32_t require_special_id(std::string_view piece, std::string_view purpose) const;

 private:
  // The constructor's steps, in order.
  void store_pieces(const std::vector<std::string>& pieces);
  void index_pieces(bool byte_fallback);
  void set_unknown_token(const std::string& unk_piece);
  void build_merges(const MergeList& merges);

  std::string source_;
  std::vector<char> piece_arena_;      // all pieces back to back (a vector: its buffer survives moves)
  std::vector<std::string_view> pieces_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  PieceIndex piece_to_id_;  // capacity fixed at construction (size() * 2)
  std::vector<int16_t> byte_value_;    // id -> 0..255 or -1
  std::vector<int32_t> byte_ids_ = std::vector<int32_t>(256, -1);
  MergeTable merges_;
  size_t merge_count_ = 0;
  std::vector<int32_t> added_token_ids_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = true, fuse_unk_ = true, space_to_metaspace_ = true, add_bos_ = false;
  std::map<std::string, std::string> named_tokens_;
};

// "<0x0A>" -> 10; -1 when the text is not exactly a byte-fallback piece name.
int parse_byte_piece(std::string_view piece);
// 10 -> "<0x0A>" (upper-case hex, as Gemma spells them).
std::string byte_piece(uint8_t b);

}  // namespace g4::text
