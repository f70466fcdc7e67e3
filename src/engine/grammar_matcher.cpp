#include "engine/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include "platform/error.h"
#include "text/tokenizer.h"

namespace g4::grammar {

namespace {

// A UTF-8 lead byte: how many continuation bytes follow, the bits it carries, and the smallest
// code point of that length (anything below is an overlong encoding). need < 0: not a lead byte.
struct Lead {
  int need;
  uint32_t cp, min;
};
Lead lead_byte(uint8_t b) {
  if (b < 0x80) return {0, b, 0};
  if (b >= 0xC2 && b <= 0xDF) return {1, uint32_t(b & 0x1F), 0x80};
  if (b >= 0xE0 && b <= 0xEF) return {2, uint32_t(b & 0x0F), 0x800};
  if (b >= 0xF0 && b <= 0xF4) return {3, uint32_t(b & 0x07), 0x10000};
  return {-1, 0, 0};
}

bool valid_code_point(uint32_t cp, uint32_t min) {
  return cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// The code points a partial sequence (cp so far, `need` continuation bytes to come) can still
// become; false when none is valid.
bool partial_range(uint32_t cp, int need, uint32_t min, uint32_t& lo, uint32_t& hi) {
  lo = cp << (6 * need);
  hi = lo | ((1u << (6 * need)) - 1);
  lo = std::max(lo, min);
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return false;
  if (lo >= 0xD800 && hi <= 0xDFFF) return false;
  return true;
}

void set_bits(std::vector<uint64_t>& words, const std::vector<int32_t>& tokens, uint32_t b, uint32_t e) {
  for (uint32_t k = b; k < e; ++k) words[size_t(tokens[k]) >> 6] |= uint64_t(1) << (tokens[k] & 63);
}

}  // namespace

void TokenMask::or_with(const std::vector<uint64_t>& other) {
  const size_t n = std::min(words_.size(), other.size());
  for (size_t i = 0; i < n; ++i) words_[i] |= other[i];
}

int TokenMask::count() const {
  int c = 0;
  for (uint64_t w : words_) c += std::popcount(w);
  return c;
}

// ---------------------------------------------------------------------------------------------
// GrammarVocab

GrammarVocab::GrammarVocab(std::vector<std::string> token_bytes, std::vector<bool> special)
    : bytes_(std::move(token_bytes)), special_(std::move(special)) {
  if (special_.size() != bytes_.size()) throw Error("grammar vocab: bytes and special flags differ in length");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!special_[i] && !bytes_[i].empty()) ids.push_back(int32_t(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  byte_.push_back(0);
  end_.push_back(0);
  tok_begin_.push_back(0);
  std::vector<uint32_t> path{0};
  std::string cur;
  for (int32_t id : ids) {
    const std::string& b = bytes_[size_t(id)];
    size_t l = 0;
    while (l < cur.size() && l < b.size() && cur[l] == b[l]) ++l;
    while (path.size() > l + 1) {
      end_[path.back()] = uint32_t(byte_.size());
      path.pop_back();
    }
    cur.resize(l);
    for (size_t k = l; k < b.size(); ++k) {
      path.push_back(uint32_t(byte_.size()));
      byte_.push_back(uint8_t(b[k]));
      end_.push_back(0);
      tok_begin_.push_back(uint32_t(tokens_.size()));
      cur.push_back(b[k]);
    }
    tokens_.push_back(id);
    max_bytes_ = std::max(max_bytes_, b.size());
  }
  while (!path.empty()) {
    end_[path.back()] = uint32_t(byte_.size());
    path.pop_back();
  }
  tok_begin_.push_back(uint32_t(tokens_.size()));
}

std::shared_ptr<const GrammarVocab> GrammarVocab::from_tokenizer(const text::Tokenizer& tok) {
  const text::Vocabulary& v = tok.vocab();
  std::vector<std::string> bytes(size_t(v.size()));
  std::vector<bool> special(size_t(v.size()), false);
  for (int32_t id = 0; id < v.size(); ++id) {
    if (tok.is_special(id)) {
      special[size_t(id)] = true;
    } else if (v.type(id) == text::TokenType::Byte) {
      bytes[size_t(id)] = std::string(1, char(v.byte_value(id)));
    } else if (v.type(id) != text::TokenType::Unused) {
      bytes[size_t(id)] = std::string(tok.token_text(id));
    }
  }
  return std::make_shared<const GrammarVocab>(std::move(bytes), std::move(special));
}

// ---------------------------------------------------------------------------------------------
// CompiledGrammar

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const GrammarVocab> vocab)
    : grammar_(std::move(g)), vocab_(std::move(vocab)) {
  if (grammar_.root < 0 || size_t(grammar_.root) >= grammar_.rules.size()) throw Error("grammar: no root rule");
  starts_.resize(grammar_.rules.size());
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    for (const auto& alt : grammar_.rules[r].alternatives) {
      starts_[r].push_back(int32_t(flat_.size()));
      for (const auto& e : alt) {
        Flat f;
        f.kind = e.kind;
        f.id = e.id;
        if (e.kind == Element::Kind::token && (e.id < 0 || e.id >= vocab_->size() || !vocab_->special(e.id)))
          throw Error("grammar: <[" + std::to_string(e.id) + "]> in rule '" + grammar_.rules[r].name +
                      "' is not a special token of this vocabulary (" + std::to_string(vocab_->size()) + " tokens)");
        if (e.kind == Element::Kind::chars) {
          f.negated = e.negated;
          f.range_begin = uint32_t(ranges_.size());
          ranges_.insert(ranges_.end(), e.ranges.begin(), e.ranges.end());
          f.range_end = uint32_t(ranges_.size());
          for (uint32_t c = 0; c < 128; ++c)
            if (chars_match(e, c)) f.ascii[c >> 6] |= uint64_t(1) << (c & 63);
        }
        flat_.push_back(f);
      }
      Flat end;
      end.end = true;
      flat_.push_back(end);
    }
  }
  frames_.push_back({-1, -1});  // kAccept
  frames_.push_back({-1, -1});  // kEscape
}

CompiledGrammar::Stats CompiledGrammar::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {frames_.size(), contexts_.size(), walk_seconds_};
}

bool CompiledGrammar::matches(int32_t pos, uint32_t cp) const {
  const Flat& f = flat_[size_t(pos)];
  if (f.kind != Element::Kind::chars) return false;
  if (cp < 128) return (f.ascii[cp >> 6] >> (cp & 63)) & 1;
  bool in = false;
  for (uint32_t k = f.range_begin; k < f.range_end; ++k) {
    if (cp < ranges_[k].lo) break;
    if (cp <= ranges_[k].hi) {
      in = true;
      break;
    }
  }
  return in != f.negated;
}

bool CompiledGrammar::may_start(int32_t pos, uint32_t lo, uint32_t hi) const {
  const Flat& f = flat_[size_t(pos)];
  if (f.kind != Element::Kind::chars) return false;
  if (!f.negated) {
    for (uint32_t k = f.range_begin; k < f.range_end; ++k)
      if (ranges_[k].lo <= hi && ranges_[k].hi >= lo) return true;
    return false;
  }
  uint32_t cur = lo;  // first code point not yet known to be excluded
  for (uint32_t k = f.range_begin; k < f.range_end; ++k) {
    if (ranges_[k].lo > cur) return true;
    if (ranges_[k].hi >= cur) cur = ranges_[k].hi + 1;
    if (cur > hi) return false;
  }
  return cur <= hi;
}

int32_t CompiledGrammar::frame(int32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
  auto [it, fresh] = frame_ids_.try_emplace(key, int32_t(frames_.size()));
  if (fresh) frames_.push_back({pos, parent});
  return it->second;
}

void CompiledGrammar::expand_into(int32_t s, std::vector<int32_t>& out, int depth) {
  if (depth > 2000) throw Error("grammar: a rule expands through more than 2000 nested rules before reading a character");
  if (s == kAccept || s == kEscape) {
    out.push_back(s);
    return;
  }
  const Frame fr = frames_[size_t(s)];
  const Flat& f = flat_[size_t(fr.pos)];
  if (f.end) {
    expand_into(fr.parent, out, depth + 1);
  } else if (f.kind == Element::Kind::rule) {
    // A reference last in its alternative returns straight to the parent (a tail call).
    const int32_t ret = flat_[size_t(fr.pos) + 1].end ? fr.parent : frame(fr.pos + 1, fr.parent);
    for (int32_t a : starts_[size_t(f.id)]) expand_into(frame(a, ret), out, depth + 1);
  } else {
    out.push_back(s);
  }
}

const std::vector<int32_t>& CompiledGrammar::expand(int32_t s) {
  if (size_t(s) >= expanded_done_.size()) {
    expanded_done_.resize(frames_.size() * 2 + 16, 0);
    expanded_.resize(expanded_done_.size());
  }
  if (!expanded_done_[size_t(s)]) {
    std::vector<int32_t> out;
    expand_into(s, out, 0);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (size_t(s) >= expanded_done_.size()) {  // expand_into may have added frames
      expanded_done_.resize(frames_.size() * 2 + 16, 0);
      expanded_.resize(expanded_done_.size());
    }
    expanded_[size_t(s)] = std::move(out);
    expanded_done_[size_t(s)] = 1;
  }
  return expanded_[size_t(s)];
}

void CompiledGrammar::step(const std::vector<int32_t>& from, uint32_t cp, std::vector<int32_t>& to) {
  to.clear();
  for (int32_t s : from) {
    if (s == kAccept || s == kEscape) continue;
    const Frame fr = frames_[size_t(s)];
    if (!matches(fr.pos, cp)) continue;
    const int32_t next = frame(fr.pos + 1, fr.parent);
    const auto& ex = expand(next);
    to.insert(to.end(), ex.begin(), ex.end());
  }
  if (to.size() > 1) {
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
  }
}

bool CompiledGrammar::partial_viable(const std::vector<int32_t>& set, uint32_t lo, uint32_t hi) const {
  for (int32_t s : set)
    if (s != kAccept && s != kEscape && may_start(frames_[size_t(s)].pos, lo, hi)) return true;
  return false;
}

bool CompiledGrammar::run_bytes(std::string_view bytes, std::vector<int32_t>& set, uint32_t& cp, int& need,
                                uint32_t& min_cp) {
  std::vector<int32_t> next;
  for (char ch : bytes) {
    const uint8_t b = uint8_t(ch);
    if (need == 0) {
      const Lead l = lead_byte(b);
      if (l.need < 0) return false;
      cp = l.cp, need = l.need, min_cp = l.min;
    } else {
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
      --need;
    }
    if (need == 0) {
      if (!valid_code_point(cp, min_cp)) return false;
      step(set, cp, next);
      set.swap(next);
      if (set.empty()) return false;
    }
  }
  if (need > 0) {
    uint32_t lo, hi;
    if (!partial_range(cp, need, min_cp, lo, hi) || !partial_viable(set, lo, hi)) return false;
  }
  return true;
}

namespace {

struct WalkState {
  const std::vector<int32_t>* set;
  uint32_t cp, min;
  int need;
  bool escaped;  // some path left the context earlier in the token
};

}  // namespace

void CompiledGrammar::walk(const std::vector<int32_t>& start, uint32_t cp0, int need0, uint32_t min0,
                           std::vector<uint64_t>& accepted, std::vector<int32_t>* uncertain) {
  const GrammarVocab& v = *vocab_;
  const std::vector<int32_t>& toks = v.tokens();
  // One set per trie depth, sized up front: items point at them.
  std::vector<std::vector<int32_t>> sets(v.max_bytes() + 1);
  // Iterative preorder walk: stack of (node, state at its parent).
  struct Item {
    uint32_t node;
    int depth;
    WalkState parent;
  };
  std::vector<Item> todo;
  for (uint32_t c = 1; c < v.nodes(); c = v.end(c)) todo.push_back({c, 0, {&start, cp0, min0, need0, false}});
  std::reverse(todo.begin(), todo.end());
  // Sets are owned per depth; a node's children are pushed after it is processed, and the whole
  // subtree of a node is finished before its next sibling, so sets[depth] is stable while used.
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    const uint32_t i = it.node;
    const WalkState& ps = it.parent;
    const uint8_t b = v.byte(i);
    uint32_t cp;
    uint32_t min = ps.min;
    int need;
    bool complete = false, bad = false;
    if (ps.need == 0) {
      const Lead l = lead_byte(b);
      if (l.need < 0) bad = true;
      cp = l.cp, need = l.need, min = l.min;
    } else {
      if ((b & 0xC0) != 0x80) bad = true;
      cp = (ps.cp << 6) | (b & 0x3F);
      need = ps.need - 1;
    }
    const uint32_t own_b = v.tok_begin(i), own_e = v.tok_begin(i + 1), sub_e = v.tok_begin(v.end(i));
    if (bad || (need == 0 && !valid_code_point(cp, min))) continue;  // invalid UTF-8 in any context
    complete = need == 0;
    std::vector<int32_t>& ns = sets[size_t(it.depth)];
    bool viable, escaped_now = false;
    if (complete) {
      step(*ps.set, cp, ns);
      if (!ns.empty() && ns[0] <= kEscape) {  // sorted: kAccept (0) then kEscape (1) come first
        auto e = std::find(ns.begin(), ns.end(), kEscape);
        if (e != ns.end()) {
          ns.erase(e);
          escaped_now = true;
        }
      }
      viable = !ns.empty() && !(ns.size() == 1 && ns[0] == kAccept);
      // A token may end on a stack that is complete: kAccept alone still accepts it.
      const bool ends_ok = !ns.empty() || escaped_now;
      if (ends_ok) set_bits(accepted, toks, own_b, own_e);
      else if (ps.escaped && uncertain) uncertain->insert(uncertain->end(), toks.begin() + own_b, toks.begin() + own_e);
    } else {
      uint32_t lo, hi;
      viable = partial_range(cp, need, min, lo, hi) && partial_viable(*ps.set, lo, hi);
      ns = *ps.set;
      if (viable) set_bits(accepted, toks, own_b, own_e);
      else if (ps.escaped && uncertain) uncertain->insert(uncertain->end(), toks.begin() + own_b, toks.begin() + own_e);
    }
    const bool esc = ps.escaped || escaped_now;
    if (v.end(i) == i + 1) continue;  // a leaf
    if (!viable) {
      if (esc && uncertain) uncertain->insert(uncertain->end(), toks.begin() + own_e, toks.begin() + sub_e);
      continue;
    }
    const size_t mark = todo.size();
    for (uint32_t c = i + 1; c < v.end(i); c = v.end(c)) todo.push_back({c, it.depth + 1, {&ns, cp, min, need, esc}});
    std::reverse(todo.begin() + std::ptrdiff_t(mark), todo.end());
  }
}

int32_t CompiledGrammar::context_of(int32_t s) {
  auto it = context_ids_.find(s);
  if (it != context_ids_.end()) return it->second;
  int32_t pos[kContextFrames];
  int n = 0;
  int32_t cur = s;
  while (n < kContextFrames && cur != kAccept) {
    pos[n++] = frames_[size_t(cur)].pos;
    cur = frames_[size_t(cur)].parent;
  }
  int32_t ctx = s;  // a stack no deeper than a context is its own context
  if (cur != kAccept) {
    ctx = kEscape;
    for (int k = n - 1; k >= 0; --k) ctx = frame(pos[k], ctx);
  }
  context_ids_[s] = ctx;
  return ctx;
}

const CompiledGrammar::ContextMask& CompiledGrammar::context_mask(int32_t ctx) {
  auto it = contexts_.find(ctx);
  if (it != contexts_.end()) return *it->second;
  const auto t0 = std::chrono::steady_clock::now();
  auto cm = std::make_unique<ContextMask>();
  cm->accepted.assign((size_t(vocab_->size()) + 63) / 64, 0);
  const std::vector<int32_t> start{ctx};
  walk(start, 0, 0, 0, cm->accepted, &cm->uncertain);
  std::sort(cm->uncertain.begin(), cm->uncertain.end());
  cm->uncertain.erase(std::unique(cm->uncertain.begin(), cm->uncertain.end()), cm->uncertain.end());
  walk_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *contexts_.emplace(ctx, std::move(cm)).first->second;
}

// ---------------------------------------------------------------------------------------------
// GrammarMatcher

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> g) : g_(std::move(g)) {
  std::lock_guard<std::mutex> lock(g_->mu_);
  for (int32_t a : g_->starts_[size_t(g_->grammar_.root)]) {
    const auto& ex = g_->expand(g_->frame(a, CompiledGrammar::kAccept));
    stacks_.insert(stacks_.end(), ex.begin(), ex.end());
  }
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

bool GrammarMatcher::can_end() const {
  return need_ == 0 && !stacks_.empty() && stacks_[0] == CompiledGrammar::kAccept;
}

bool GrammarMatcher::can_continue() const {
  for (int32_t s : stacks_)
    if (s != CompiledGrammar::kAccept) return true;
  return false;
}

void GrammarMatcher::fill_mask(TokenMask& mask, std::span<const int> end_tokens) {
  CompiledGrammar& g = *g_;
  if (mask.size() != g.vocab_->size()) mask.resize(g.vocab_->size());
  mask.clear();
  std::lock_guard<std::mutex> lock(g.mu_);
  if (need_ > 0) {
    // Mid code point: few tokens start with a continuation byte, so walk them against the stacks.
    std::vector<uint64_t> words(mask.words().size(), 0);
    g.walk(stacks_, cp_, need_, min_cp_, words, nullptr);
    mask.or_with(words);
  } else {
    std::vector<int32_t> one, scratch;
    for (int32_t s : stacks_) {
      if (s == CompiledGrammar::kAccept) continue;
      const auto& f = g.flat_[size_t(g.frames_[size_t(s)].pos)];
      if (f.kind == Element::Kind::token) {
        mask.set(f.id);
        continue;
      }
      const auto& cm = g.context_mask(g.context_of(s));
      mask.or_with(cm.accepted);
      for (int32_t t : cm.uncertain) {
        if (mask.test(t)) continue;
        one.assign(1, s);
        uint32_t cp = 0, min = 0;
        int need = 0;
        if (g.run_bytes(g.vocab_->bytes(t), one, cp, need, min)) mask.set(t);
      }
    }
  }
  if (can_end())
    for (int e : end_tokens)
      if (e >= 0 && e < mask.size()) mask.set(e);
}

bool GrammarMatcher::accept(int token) {
  CompiledGrammar& g = *g_;
  if (token < 0 || token >= g.vocab_->size()) return false;
  std::lock_guard<std::mutex> lock(g.mu_);
  if (g.vocab_->special(token)) {
    if (need_ > 0) return false;
    std::vector<int32_t> next;
    for (int32_t s : stacks_) {
      if (s == CompiledGrammar::kAccept) continue;
      const auto fr = g.frames_[size_t(s)];
      const auto& f = g.flat_[size_t(fr.pos)];
      if (f.kind != Element::Kind::token || f.id != token) continue;
      const auto& ex = g.expand(g.frame(fr.pos + 1, fr.parent));
      next.insert(next.end(), ex.begin(), ex.end());
    }
    if (next.empty()) return false;
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    stacks_.swap(next);
    return true;
  }
  const std::string& bytes = g.vocab_->bytes(token);
  if (bytes.empty()) return false;
  std::vector<int32_t> set = stacks_;
  uint32_t cp = cp_, min = min_cp_;
  int need = need_;
  if (!g.run_bytes(bytes, set, cp, need, min)) return false;
  stacks_.swap(set);
  cp_ = cp, need_ = need, min_cp_ = min;
  return true;
}

}  // namespace g4::grammar
