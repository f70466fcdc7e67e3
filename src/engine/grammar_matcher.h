// Constrained decoding: a grammar (grammar.h) run as a pushdown automaton over the bytes of the
// vocabulary's tokens, giving at every step the set of token ids that keep the output a prefix
// of some sentence of the grammar.
//
// State. A stack is a chain of frames (grammar positions: the element to match next, then the
// return positions of the rules it is inside), hash-consed so that equal stacks are one id. The
// matcher holds a set of stacks (the grammar may be ambiguous) plus the bytes of a code point a
// token left unfinished (byte-fallback tokens split UTF-8 characters). Expanding a rule
// reference whose return position is the end of its own rule drops that frame (a tail call), so
// right-recursive loops (x*, arrays, string bodies) keep stacks flat and come back to the same id.
//
// Masks. Walking all 262,144 tokens through the automaton every step would cost far more than a
// decode step, so masks are cached per *context*: the top kContextFrames frames of a stack with
// an "unknown" bottom below them. Walking the token trie from a context once sorts every token
// into accepted (matched without leaving the context, or ending exactly where it leaves),
// rejected, or uncertain (it leaves the context and continues, so what follows depends on the
// frames below). A step then ORs the cached accepted bitsets of its stacks and checks only the
// uncertain tokens against the real stack. Inside a JSON string, for example, the context is the
// same for every string of every field, nearly every token is accepted, and only the few that
// contain the closing quote followed by more text are checked.
//
// Special tokens (control tokens such as <|tool_call>) never match text; a grammar names them
// as <[ID]>. The end tokens are allowed exactly where the grammar may end.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"

namespace g4::text {
class Tokenizer;
}

namespace g4::grammar {

// A set of token ids as a bitset over the vocabulary.
class TokenMask {
 public:
  explicit TokenMask(int vocab_size = 0) { resize(vocab_size); }
  void resize(int vocab_size) {
    size_ = vocab_size;
    words_.assign((size_t(vocab_size) + 63) / 64, 0);
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  void set(int id) { words_[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
  bool test(int id) const { return id >= 0 && id < size_ && ((words_[size_t(id) >> 6] >> (id & 63)) & 1); }
  void or_with(const std::vector<uint64_t>& other);
  int count() const;
  int size() const { return size_; }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  int size_ = 0;
  std::vector<uint64_t> words_;
};

// The vocabulary as a grammar sees it: the bytes each token adds to the text (a byte-fallback
// token its one byte), which tokens are special, and a byte trie of the others in preorder.
class GrammarVocab {
 public:
  // special[i]: token i never matches text (only an <[ID]> terminal). Tokens with no bytes that
  // are not special never match at all.
  GrammarVocab(std::vector<std::string> token_bytes, std::vector<bool> special);
  static std::shared_ptr<const GrammarVocab> from_tokenizer(const text::Tokenizer& tokenizer);

  int size() const { return int(bytes_.size()); }
  const std::string& bytes(int id) const { return bytes_[size_t(id)]; }
  bool special(int id) const { return special_[size_t(id)]; }
  size_t max_bytes() const { return max_bytes_; }  // the longest token's bytes

  // Trie in preorder: node 0 is the root; node i's children are i+1, end(i+1), ... up to end(i).
  // The tokens whose bytes end at node i are tokens()[tok_begin(i) .. tok_begin(i+1)); those of
  // its whole subtree tokens()[tok_begin(i) .. tok_begin(end(i))).
  uint32_t nodes() const { return uint32_t(byte_.size()); }
  uint8_t byte(uint32_t i) const { return byte_[i]; }
  uint32_t end(uint32_t i) const { return end_[i]; }
  uint32_t tok_begin(uint32_t i) const { return tok_begin_[i]; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> end_, tok_begin_;  // tok_begin_ has nodes() + 1 entries
  std::vector<int32_t> tokens_;
  size_t max_bytes_ = 0;
};

// A grammar bound to a vocabulary, with the automaton's shared, lazily grown tables (stack
// frames, expansions, context masks). Matchers of one grammar may live on several threads; the
// tables are guarded by one mutex.
class CompiledGrammar {
 public:
  // Throws g4::Error when an <[ID]> terminal names a token outside the vocabulary or one that
  // is not special.
  CompiledGrammar(Grammar grammar, std::shared_ptr<const GrammarVocab> vocab);

  const Grammar& grammar() const { return grammar_; }
  const GrammarVocab& vocab() const { return *vocab_; }

  struct Stats {
    size_t frames = 0, contexts = 0;
    double context_walk_seconds = 0;  // time spent building context masks
  };
  Stats stats() const;

 private:
  friend class GrammarMatcher;
  static constexpr int32_t kAccept = 0;  // the empty stack: the grammar may end here
  static constexpr int32_t kEscape = 1;  // left a context through its unknown bottom
  static constexpr int kContextFrames = 3;

  struct Flat {
    Element::Kind kind;
    bool end = false;         // the end of an alternative
    bool negated = false;
    uint64_t ascii[2] = {0, 0};  // chars: matches of code points 0..127
    uint32_t range_begin = 0, range_end = 0;
    int32_t id = -1;          // rule: its first-element positions are starts_[id]; token: its id
  };
  struct Frame {
    int32_t pos, parent;
  };
  struct ContextMask {
    std::vector<uint64_t> accepted;
    std::vector<int32_t> uncertain;
  };

  bool matches(int32_t pos, uint32_t cp) const;
  bool may_start(int32_t pos, uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi]
  int32_t frame(int32_t pos, int32_t parent);
  const std::vector<int32_t>& expand(int32_t stack);
  void expand_into(int32_t stack, std::vector<int32_t>& out, int depth);
  void step(const std::vector<int32_t>& from, uint32_t cp, std::vector<int32_t>& to);
  bool partial_viable(const std::vector<int32_t>& set, uint32_t lo, uint32_t hi) const;
  int32_t context_of(int32_t stack);
  const ContextMask& context_mask(int32_t context);
  // Walks the trie from `set` with a pending partial code point; accepted tokens set bits in
  // `accepted`, uncertain ones are appended to `uncertain` (only when `set` has kEscape paths).
  void walk(const std::vector<int32_t>& set, uint32_t cp, int need, uint32_t min_cp, std::vector<uint64_t>& accepted,
            std::vector<int32_t>* uncertain);
  // Runs one token's bytes from `set` (with a pending partial code point) into `out`; false when
  // no stack survives. The partial code point left at the end is returned through cp/need/min_cp.
  bool run_bytes(std::string_view bytes, std::vector<int32_t>& set, uint32_t& cp, int& need, uint32_t& min_cp);

  Grammar grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::vector<Flat> flat_;
  std::vector<CharRange> ranges_;
  std::vector<std::vector<int32_t>> starts_;  // rule -> first position of each alternative

  mutable std::mutex mu_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> frame_ids_;
  std::vector<std::vector<int32_t>> expanded_;  // stack -> its terminal-topped stacks
  std::vector<uint8_t> expanded_done_;
  std::unordered_map<int32_t, int32_t> context_ids_;  // stack -> context stack
  std::unordered_map<int32_t, std::unique_ptr<ContextMask>> contexts_;
  double walk_seconds_ = 0;
};

// One sequence's position in the grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

  // The tokens allowed next: text tokens that keep the output a grammar prefix, special tokens
  // named by the next terminal, and `end_tokens` where the grammar may end. mask is resized to
  // the vocabulary.
  void fill_mask(TokenMask& mask, std::span<const int> end_tokens);
  // Advances by one token; false (and no change) when the grammar does not allow it.
  bool accept(int token);
  // The output so far is a whole sentence of the grammar (no partial code point pending).
  bool can_end() const;
  // Some continuation is still possible.
  bool can_continue() const;

 private:
  std::shared_ptr<CompiledGrammar> g_;
  std::vector<int32_t> stacks_;
  uint32_t cp_ = 0, min_cp_ = 0;  // the pending partial code point
  int need_ = 0;                  // continuation bytes it still needs
};

}  // namespace g4::grammar
