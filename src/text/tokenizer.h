// Gemma's tokenizer: Hugging Face BPE with byte fallback, encoded and decoded exactly as the
// reference (`tokenizers` / transformers.js) does for Gemma's tokenizer.json:
//   encode: added tokens are matched in the raw text first (leftmost-longest); each stretch
//           between them is normalized (" " -> U+2581) and BPE-merged as one word, lowest merge
//           rank first (ties: leftmost); characters without a piece become <0xNN> byte pieces.
//   decode: U+2581 -> " ", runs of <0xNN> pieces are joined into bytes (a run that is not valid
//           UTF-8 becomes one U+FFFD per byte), everything concatenated; nothing stripped.
// Encoding is O(n log n) in segment length (a heap of candidate merges over a linked list).
// A Tokenizer is immutable once built; encode/decode may run on many threads at once (the
// merge scratch space is thread_local).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/added_token_matcher.h"
#include "text/vocab.h"

namespace g4::text {

struct EncodeOptions {
  bool add_bos = false;             // prepend the bos token (the chat template writes its own)
  bool match_added_tokens = true;   // false: "<bos>" in the text is plain characters
};

struct DecodeOptions {
  bool skip_special = false;  // drop control tokens (<bos>, <turn|>, ...) and <unk>
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocabulary vocab);

  // tokenizer.json, plus tokenizer_config.json from the same directory when it exists.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // DIR/tokenizer.json (+ DIR/tokenizer_config.json). Throws g4::Error naming what is missing.
  static Tokenizer from_dir(const std::filesystem::path& dir);

  const Vocabulary& vocab() const { return vocab_; }

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends to out (no bos); what encode() and the chat template build on.
  void encode_append(std::string_view text, std::vector<int32_t>& out, bool match_added_tokens = true) const;

  // Ids outside the vocabulary decode to nothing (decode is on the generation path and never throws).
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // What one token contributes to decoded text: the piece with U+2581 -> " ". Byte pieces give
  // "" here (their byte is vocab().byte_value(id)); invalid ids give "".
  std::string_view token_text(int32_t id) const {
    if (!vocab_.valid_id(id)) return {};
    return std::string_view(decoded_arena_).substr(decoded_offsets_[size_t(id)],
                                                   decoded_offsets_[size_t(id) + 1] - decoded_offsets_[size_t(id)]);
  }
  // True for tokens DecodeOptions::skip_special drops.
  bool is_special(int32_t id) const {
    return vocab_.valid_id(id) && (vocab_.type(id) == TokenType::Control || vocab_.type(id) == TokenType::Unknown);
  }

  // The bos token named by tokenizer_config (bos_token) or the post-processor; nullopt if neither.
  std::optional<int32_t> bos_id() const { return bos_id_; }

 private:
  void encode_segment(std::string_view raw, std::vector<int32_t>& out) const;
  int32_t char_id(std::string_view s, size_t at, size_t len) const;

  Vocabulary vocab_;
  AddedTokenMatcher added_;
  std::vector<int32_t> bmp_char_id_;       // code point < 0x10000 -> id of its one-character piece, or -1
  std::string decoded_arena_;              // token_text of every id, back to back
  std::vector<uint32_t> decoded_offsets_;  // id -> start in decoded_arena_ (size()+1 entries)
  int32_t metaspace_id_ = -1;
  std::optional<int32_t> bos_id_;
};

}  // namespace g4::text
