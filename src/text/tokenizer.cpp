#include "text/tokenizer.h"

#include <algorithm>
#include <queue>

#include "platform/error.h"
#include "text/tokenizer_json.h"
#include "text/utf8.h"

namespace g4::text {

Tokenizer::Tokenizer(Vocabulary vocab) : vocab_(std::move(vocab)), added_(vocab_) {
  const int32_t n = vocab_.size();
  bmp_char_id_.assign(0x10000, -1);
  decoded_offsets_.resize(size_t(n) + 1);
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view p = vocab_.piece(id);
    const size_t len = utf8_char_length(p, 0);
    if (len != 0 && len == p.size()) {
      const uint32_t cp = utf8_decode_at(p, 0, len);
      if (cp < 0x10000 && bmp_char_id_[cp] < 0) bmp_char_id_[cp] = id;
    }
    decoded_offsets_[size_t(id)] = uint32_t(decoded_arena_.size());
    if (vocab_.byte_value(id) >= 0) continue;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, kMetaspace.size(), kMetaspace) == 0) {
        decoded_arena_.push_back(' ');
        i += kMetaspace.size();
      } else {
        decoded_arena_.push_back(p[i++]);
      }
    }
  }
  decoded_offsets_[size_t(n)] = uint32_t(decoded_arena_.size());
  metaspace_id_ = vocab_.find(kMetaspace);
  if (auto bos = vocab_.named_piece("bos_token")) bos_id_ = vocab_.find(*bos);
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return Tokenizer(Vocabulary(read_tokenizer_json(tokenizer_json, tokenizer_json.parent_path() / "tokenizer_config.json")));
}

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
  const auto file = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(file))
    throw Error(dir.string() + ": no tokenizer.json in this directory");
  return from_file(file);
}

int32_t Tokenizer::char_id(std::string_view s, size_t at, size_t len) const {
  const uint32_t cp = utf8_decode_at(s, at, len);
  if (cp < 0x10000) return bmp_char_id_[cp];
  return vocab_.find(s.substr(at, len));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_bos) {
    if (!bos_id_) throw Error(vocab_.source() + ": asked to add a bos token, but the files name none");
    ids.push_back(*bos_id_);
  }
  encode_append(text, ids, options.match_added_tokens);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out, bool match_added_tokens) const {
  size_t at = 0;
  while (at < text.size()) {
    const AddedTokenMatcher::Match m =
        match_added_tokens ? added_.next(text, at) : AddedTokenMatcher::Match{};
    const size_t seg_end = m.id >= 0 ? m.begin : text.size();
    if (seg_end > at) encode_segment(text.substr(at, seg_end - at), out);
    if (m.id < 0) break;
    out.push_back(m.id);
    at = m.end;
  }
}

namespace {

// One symbol of the word being merged; a doubly linked list over a vector.
struct Symbol {
  int32_t id;    // -1 once merged into its left neighbour
  int32_t prev;  // index, -1 at the start
  int32_t next;  // index, -1 at the end
};

// A merge that was possible when queued; stale entries are skipped when popped.
struct Candidate {
  uint32_t rank;
  int32_t pos;  // index of the left symbol
  int32_t left_id, right_id, merged_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

struct Scratch {
  std::string normalized;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// The normalizer: " " -> U+2581 when the vocabulary asks for it.
void normalize_spaces(std::string_view raw, bool space_to_metaspace, std::string& norm) {
  if (space_to_metaspace) {
    for (char c : raw) {
      if (c == ' ') norm.append(kMetaspace);
      else norm.push_back(c);
    }
  } else {
    norm.assign(raw);
  }
}

void append_symbol(std::vector<Symbol>& syms, int32_t id) {
  const int32_t idx = int32_t(syms.size());
  syms.push_back(Symbol{id, idx - 1, -1});
}

// A character without a piece: its bytes as <0xNN>, or (no byte pieces) one <unk>, fused.
void append_unknown(std::vector<Symbol>& syms, const Vocabulary& vocab, std::string_view bytes) {
  if (vocab.byte_fallback()) {
    bool all = true;
    for (char b : bytes) all = all && vocab.byte_id(uint8_t(b)) >= 0;
    if (all) {
      for (char b : bytes) append_symbol(syms, vocab.byte_id(uint8_t(b)));
      return;
    }
  }
  const int32_t unk = *vocab.unk_id();  // Vocabulary guarantees one exists when needed
  if (vocab.fuse_unk() && !syms.empty() && syms.back().id == unk) return;
  append_symbol(syms, unk);
}

// BPE: repeatedly joins the adjacent pair with the lowest merge rank (leftmost on ties) until no
// pair has a merge. Merged-away symbols stay in the vector with id -1, unlinked.
void apply_merges(std::vector<Symbol>& syms, std::vector<Candidate>& heap, const MergeTable& merges) {
  for (size_t i = 0; i + 1 < syms.size(); ++i) syms[i].next = int32_t(i + 1);
  heap.clear();
  const std::greater<Candidate> later;
  auto offer = [&](int32_t pos) {
    const Symbol& l = syms[size_t(pos)];
    if (l.next < 0) return;
    const int32_t right = syms[size_t(l.next)].id;
    if (const MergeRule* r = merges.find(l.id, right)) {
      heap.push_back(Candidate{r->rank, pos, l.id, right, r->merged_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) {
    if (const MergeRule* r = merges.find(syms[i].id, syms[i + 1].id))
      heap.push_back(Candidate{r->rank, int32_t(i), syms[i].id, syms[i + 1].id, r->merged_id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = syms[size_t(c.pos)];
    if (left.id != c.left_id || left.next < 0) continue;
    Symbol& right = syms[size_t(left.next)];
    if (right.id != c.right_id) continue;
    left.id = c.merged_id;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) syms[size_t(left.next)].prev = c.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(c.pos);
  }
}

}  // namespace

void Tokenizer::encode_segment(std::string_view raw, std::vector<int32_t>& out) const {
  thread_local Scratch scratch;
  std::string& norm = scratch.normalized;
  std::vector<Symbol>& syms = scratch.symbols;
  norm.clear();
  syms.clear();
  normalize_spaces(raw, vocab_.space_to_metaspace(), norm);
  const std::string_view s = norm;

  // One symbol per character: its one-character piece, else byte pieces or <unk>.
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_char_length(s, i);
    if (len == 0) {  // not UTF-8: the byte on its own
      append_unknown(syms, vocab_, s.substr(i, 1));
      i += 1;
      continue;
    }
    const int32_t id = (len == 3 && metaspace_id_ >= 0 && s.compare(i, 3, kMetaspace) == 0) ? metaspace_id_
                                                                                             : char_id(s, i, len);
    if (id >= 0) append_symbol(syms, id);
    else append_unknown(syms, vocab_, s.substr(i, len));
    i += len;
  }
  if (syms.empty()) return;
  apply_merges(syms, scratch.heap, vocab_.merges());
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) out.push_back(syms[size_t(i)].id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string text;
  std::string run;  // pending byte-fallback bytes
  auto flush = [&] {
    if (run.empty()) return;
    if (utf8_valid(run)) {
      text += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) text += kReplacementChar;
    }
    run.clear();
  };
  for (int32_t id : ids) {
    if (!vocab_.valid_id(id)) continue;
    if (options.skip_special && is_special(id)) continue;
    const int b = vocab_.byte_value(id);
    if (b >= 0) {
      run.push_back(char(b));
      continue;
    }
    flush();
    text += token_text(id);
  }
  flush();
  return text;
}

}  // namespace g4::text
