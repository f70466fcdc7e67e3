#include "text/vocab.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "platform/error.h"
#include "platform/thread_pool.h"
#include "text/utf8.h"

namespace g4::text {

int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string byte_piece(uint8_t b) {
  static const char* digits = "0123456789ABCDEF";
  return std::string("<0x") + digits[b >> 4] + digits[b & 15] + ">";
}

static std::string quote_piece(std::string_view s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') q += "\\n";
    else if (c == '\t') q += "\\t";
    else if (c == '"') q += "\\\"";
    else q += c;
  }
  return q + "\"";
}

namespace {

// Every per-id array has one entry per piece.
void check_spec_sizes(const VocabularySpec& spec) {
  const std::string& src = spec.source;
  const size_t n = spec.pieces.size();
  if (n == 0) throw Error(src + ": the vocabulary is empty");
  if (n > size_t(INT32_MAX)) throw Error(src + ": the vocabulary is too large");
  if (spec.types.size() != n)
    throw Error(src + ": " + std::to_string(spec.types.size()) + " token types for " + std::to_string(n) + " pieces");
  if (!spec.scores.empty() && spec.scores.size() != n)
    throw Error(src + ": " + std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) + " pieces");
}

}  // namespace

Vocabulary::Vocabulary(VocabularySpec spec) {
  source_ = spec.source;
  check_spec_sizes(spec);
  store_pieces(spec.pieces);
  types_ = std::move(spec.types);
  scores_ = std::move(spec.scores);
  index_pieces(spec.byte_fallback);

  byte_fallback_ = spec.byte_fallback;
  fuse_unk_ = spec.fuse_unk;
  space_to_metaspace_ = spec.space_to_metaspace;
  add_bos_ = spec.add_bos;
  set_unknown_token(spec.unk_piece);
  build_merges(spec.merges);

  for (int32_t id : spec.added_token_ids) {
    if (id < 0 || size_t(id) >= pieces_.size())
      throw Error(source_ + ": added token id " + std::to_string(id) + " is outside the vocabulary");
    if (pieces_[size_t(id)].empty()) throw Error(source_ + ": added token " + std::to_string(id) + " is empty");
  }
  added_token_ids_ = std::move(spec.added_token_ids);

  for (const auto& [role, piece] : spec.named_tokens)
    if (find(piece) < 0)
      throw Error(source_ + ": " + role + " is " + quote_piece(piece) + ", which is not in the vocabulary");
  named_tokens_ = std::move(spec.named_tokens);
}

void Vocabulary::store_pieces(const std::vector<std::string>& pieces) {
  size_t total = 0;
  for (const auto& p : pieces) total += p.size();
  piece_arena_.resize(total);
  pieces_.reserve(pieces.size());
  size_t at = 0;
  for (const auto& p : pieces) {
    if (!p.empty()) std::memcpy(piece_arena_.data() + at, p.data(), p.size());
    pieces_.emplace_back(piece_arena_.data() + at, p.size());
    at += p.size();
  }
}

// Piece -> id (refusing empty and repeated pieces) and the byte-fallback pieces: typed BYTE, or
// (with byte fallback) a Normal piece spelled <0xNN>.
void Vocabulary::index_pieces(bool byte_fallback) {
  const std::string& src = source_;
  const size_t n = pieces_.size();
  piece_to_id_ = PieceIndex(n);
  byte_value_.assign(n, -1);
  for (size_t id = 0; id < n; ++id) {
    const std::string_view p = pieces_[id];
    if (p.empty() && types_[id] != TokenType::Unused)
      throw Error(src + ": token " + std::to_string(id) + " has an empty piece");
    int32_t first = -1;
    if (!p.empty() && !piece_to_id_.insert(p, int32_t(id), pieces_, &first))
      throw Error(src + ": piece " + quote_piece(p) + " appears twice (ids " + std::to_string(first) + " and " +
                  std::to_string(id) + ")");
    if (types_[id] == TokenType::Byte || (types_[id] == TokenType::Normal && byte_fallback)) {
      const int b = parse_byte_piece(p);
      if (b >= 0) {
        types_[id] = TokenType::Byte;
        byte_value_[id] = int16_t(b);
        byte_ids_[size_t(b)] = int32_t(id);
      } else if (types_[id] == TokenType::Byte) {
        throw Error(src + ": token " + std::to_string(id) + " is typed BYTE but its piece " + quote_piece(p) +
                    " is not <0xNN>");
      }
    }
  }
}

// The unknown token, and the check that every character can be encoded: each byte has its
// <0xNN> piece, or there is an unknown token to stand in.
void Vocabulary::set_unknown_token(const std::string& unk_piece) {
  const std::string& src = source_;
  if (!unk_piece.empty()) {
    const int32_t u = find(unk_piece);
    if (u < 0) throw Error(src + ": the unknown token " + quote_piece(unk_piece) + " is not in the vocabulary");
    unk_id_ = u;
  }
  if (byte_fallback_) {
    for (int b = 0; b < 256; ++b)
      if (byte_ids_[size_t(b)] < 0 && !unk_id_)
        throw Error(src + ": byte fallback is on but the piece " + byte_piece(uint8_t(b)) +
                    " is missing and there is no unknown token to use instead");
  } else if (!unk_id_) {
    throw Error(src + ": neither byte fallback nor an unknown token: some text could not be encoded");
  }
}

// Merge rules by the ids of their parts and result; every one must be in the vocabulary.
void Vocabulary::build_merges(const MergeList& merge_list) {
  // Resolving merge parts is ~1.5M hash lookups for Gemma: spread over cores, then insert in
  // rank order (the table is not concurrent; insertion is the cheap part).
  const size_t m = merge_list.size();
  std::vector<int32_t> resolved(m * 3);
  auto resolve = [&](int64_t begin, int64_t end, int) {
    std::string joined;
    for (int64_t r = begin; r < end; ++r) {
      const std::string_view l = merge_list.left(size_t(r)), rt = merge_list.right(size_t(r));
      joined.assign(l).append(rt);
      resolved[size_t(r) * 3] = find(l);
      resolved[size_t(r) * 3 + 1] = find(rt);
      resolved[size_t(r) * 3 + 2] = find(joined);
    }
  };
  const unsigned cores = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  if (m >= 65536 && cores > 1) {
    ThreadPool pool{int(cores)};
    pool.parallel_for(int64_t(m), resolve);
  } else {
    resolve(0, int64_t(m), 0);
  }
  merges_ = MergeTable(m);
  for (size_t r = 0; r < m; ++r) {
    const int32_t li = resolved[r * 3], ri = resolved[r * 3 + 1], mi = resolved[r * 3 + 2];
    if (li < 0 || ri < 0 || mi < 0) {
      const std::string_view l = merge_list.left(r), rt = merge_list.right(r);
      const std::string joined = std::string(l) + std::string(rt);
      const std::string_view missing = li < 0 ? l : ri < 0 ? rt : std::string_view(joined);
      throw Error(source_ + ": merge " + std::to_string(r) + " (" + quote_piece(l) + " " + quote_piece(rt) +
                  ") uses " + quote_piece(missing) + ", which is not in the vocabulary");
    }
    merges_.insert(li, ri, MergeRule{uint32_t(r), mi});
  }
  merge_count_ = m;
}

std::optional<std::string> Vocabulary::named_piece(const std::string& role) const {
  auto it = named_tokens_.find(role);
  if (it == named_tokens_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> Vocabulary::special_id(std::string_view piece, std::string* why) const {
  const int32_t id = find(piece);
  if (id < 0) {
    if (why) *why = "the token " + quote_piece(piece) + " is not in the vocabulary of " + source_;
    return std::nullopt;
  }
  if (unk_id_ && id == *unk_id_) {
    if (why) *why = "the token " + quote_piece(piece) + " is the unknown token of " + source_;
    return std::nullopt;
  }
  return id;
}

int32_t Vocabulary::require_special_id(std::string_view piece, std::string_view purpose) const {
  std::string why;
  auto id = special_id(piece, &why);
  if (!id) throw Error(why + " (needed for " + std::string(purpose) + ")");
  return *id;
}

}  // namespace g4::text
