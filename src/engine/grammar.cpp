#include "engine/grammar.h"

#include <algorithm>
#include <map>

#include "platform/error.h"

namespace g4::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Recursive-descent parser; repetition and groups are lowered to new rules as they are read.
class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  Grammar parse() {
    if (t_.size() > kMaxGrammarBytes)
      throw Error("grammar: " + std::to_string(t_.size()) + " bytes; at most " + std::to_string(kMaxGrammarBytes));
    skip_space();
    while (p_ < t_.size()) {
      const size_t at = p_;
      const std::string name = parse_name();
      skip_space();
      if (t_.substr(p_, 3) != "::=") fail(p_, "expected '::=' after the rule name '" + name + "'");
      p_ += 3;
      const int32_t id = rule_id(name);
      if (defined_[size_t(id)]) fail(at, "rule '" + name + "' is defined twice");
      defined_[size_t(id)] = true;
      g_.rules[size_t(id)].alternatives = parse_alternatives(name, /*in_group=*/false);
      skip_space();
    }
    for (size_t r = 0; r < g_.rules.size(); ++r)
      if (!defined_[r])
        fail(first_use_[r], "rule '" + g_.rules[r].name + "' is used but never defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) throw Error("grammar: no 'root' rule (the start rule must be named root)");
    g_.root = root->second;
    check_left_recursion();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw Error("grammar line " + std::to_string(line) + " col " + std::to_string(col) + ": " + what);
  }

  void skip_space() {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = p_;
    while (p_ < t_.size() && is_name_char(t_[p_])) ++p_;
    if (p_ == start) fail(p_, "expected a rule name");
    return std::string(t_.substr(start, p_ - start));
  }

  // A rule name followed by "::=" starts the next rule (ends the current one).
  bool at_rule_start() const {
    size_t q = p_;
    while (q < t_.size() && is_name_char(t_[q])) ++q;
    if (q == p_) return false;
    while (q < t_.size() && (t_[q] == ' ' || t_[q] == '\t' || t_[q] == '\n' || t_[q] == '\r')) ++q;
    return t_.substr(q, 3) == "::=";
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    if (g_.rules.size() >= kMaxRules) fail(p_, "more than " + std::to_string(kMaxRules) + " rules");
    const int32_t id = int32_t(g_.rules.size());
    g_.rules.push_back({name, {}});
    defined_.push_back(false);
    first_use_.push_back(p_);
    ids_[name] = id;
    return id;
  }

  int32_t new_rule(const std::string& parent, std::vector<Alternative> alts) {
    std::string name;
    do name = parent + "-" + std::to_string(++generated_); while (ids_.count(name));
    const int32_t id = rule_id(name);
    defined_[size_t(id)] = true;
    g_.rules[size_t(id)].alternatives = std::move(alts);
    return id;
  }

  std::vector<Alternative> parse_alternatives(const std::string& rule, bool in_group) {
    std::vector<Alternative> alts;
    alts.push_back(parse_sequence(rule, in_group));
    while (true) {
      skip_space();
      if (p_ < t_.size() && t_[p_] == '|') {
        ++p_;
        alts.push_back(parse_sequence(rule, in_group));
      } else {
        break;
      }
    }
    return alts;
  }

  Alternative parse_sequence(const std::string& rule, bool in_group) {
    Alternative seq;
    while (true) {
      skip_space();
      if (p_ >= t_.size()) break;
      const char c = t_[p_];
      if (c == '|' || (c == ')' && in_group)) break;
      if (c == ')') fail(p_, "unbalanced ')'");
      if (is_name_char(c) && at_rule_start()) {
        if (in_group) fail(p_, "a new rule starts inside an unclosed '('");
        break;
      }
      const size_t item_start = seq.size();
      if (c == '"') {
        ++p_;
        while (true) {
          if (p_ >= t_.size()) fail(p_, "unterminated string literal");
          if (t_[p_] == '"') break;
          Element e;
          const uint32_t cp = parse_char();
          e.ranges.push_back({cp, cp});
          seq.push_back(std::move(e));
        }
        ++p_;
        if (seq.size() == item_start) {  // "" matches nothing: leave no element, allow no postfix
          continue;
        }
      } else if (c == '[') {
        seq.push_back(parse_class());
      } else if (c == '.') {
        ++p_;
        Element e;
        e.negated = true;  // outside the empty set: any code point
        seq.push_back(std::move(e));
      } else if (c == '(') {
        if (++depth_ > 256) fail(p_, "groups nested more than 256 deep");
        ++p_;
        auto alts = parse_alternatives(rule, true);
        --depth_;
        skip_space();
        if (p_ >= t_.size() || t_[p_] != ')') fail(p_, "expected ')'");
        ++p_;
        Element e;
        e.kind = Element::Kind::rule;
        e.id = new_rule(rule, std::move(alts));
        seq.push_back(std::move(e));
      } else if (c == '<' && t_.substr(p_, 2) == "<[") {
        const size_t at = p_;
        p_ += 2;
        int64_t id = 0;
        const size_t digits = p_;
        while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9' && id < (1 << 30)) id = id * 10 + (t_[p_++] - '0');
        if (p_ == digits || t_.substr(p_, 2) != "]>") fail(at, "expected a token id as <[ID]>");
        p_ += 2;
        Element e;
        e.kind = Element::Kind::token;
        e.id = int32_t(id);
        seq.push_back(std::move(e));
      } else if (is_name_char(c)) {
        Element e;
        e.kind = Element::Kind::rule;
        e.id = rule_id(parse_name());
        seq.push_back(std::move(e));
      } else {
        fail(p_, std::string("unexpected character '") + c + "'");
      }
      parse_postfix(rule, seq, item_start);
    }
    return seq;
  }

  // Lowers the postfix operator (if any) applying to seq[item_start..] into rules.
  void parse_postfix(const std::string& rule, Alternative& seq, size_t item_start) {
    skip_space();
    if (p_ >= t_.size()) return;
    const char c = t_[p_];
    int min = 0, max = -1;  // max -1: unbounded
    if (c == '*') {
      ++p_;
    } else if (c == '+') {
      ++p_, min = 1;
    } else if (c == '?') {
      ++p_, max = 1;
    } else if (c == '{') {
      const size_t at = p_++;
      min = parse_count(at);
      skip_space();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        skip_space();
        max = (p_ < t_.size() && t_[p_] == '}') ? -1 : parse_count(at);
      } else {
        max = min;
      }
      skip_space();
      if (p_ >= t_.size() || t_[p_] != '}') fail(at, "expected '}' closing the repetition");
      ++p_;
      if (max >= 0 && max < min) fail(at, "repetition {m,n} with n < m");
    } else {
      return;
    }
    // The item repeated: a single element, or a literal of several code points (as a rule).
    Alternative item(seq.begin() + std::ptrdiff_t(item_start), seq.end());
    seq.resize(item_start);
    Element x;
    if (item.size() == 1) {
      x = item[0];
    } else {
      x.kind = Element::Kind::rule;
      x.id = new_rule(rule, {item});
    }
    copies_ += size_t(std::max(min, 1));
    if (copies_ > kMaxElements) fail(p_, "the grammar expands to more than " + std::to_string(kMaxElements) + " elements");
    for (int k = 0; k < min; ++k) seq.push_back(x);
    Element tail;
    tail.kind = Element::Kind::rule;
    if (max < 0) {  // R ::= x R | ""   (right recursion: the matcher's tail call keeps stacks flat)
      tail.id = new_rule(rule, {});
      Element self;
      self.kind = Element::Kind::rule;
      self.id = tail.id;
      g_.rules[size_t(tail.id)].alternatives = {{x, self}, {}};
      seq.push_back(tail);
    } else if (max > min) {  // R_k ::= x R_{k-1} | ""  nested, max - min deep
      int32_t inner = -1;
      for (int k = 0; k < max - min; ++k) {
        Alternative more = {x};
        if (inner >= 0) {
          Element ref;
          ref.kind = Element::Kind::rule;
          ref.id = inner;
          more.push_back(ref);
        }
        inner = new_rule(rule, {more, {}});
      }
      tail.id = inner;
      seq.push_back(tail);
    }
  }

  int parse_count(size_t at) {
    skip_space();
    const size_t start = p_;
    int v = 0;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      v = v * 10 + (t_[p_++] - '0');
      if (v > kMaxRepeat) fail(at, "repetition count over " + std::to_string(kMaxRepeat));
    }
    if (p_ == start) fail(at, "expected a number in the repetition");
    return v;
  }

  Element parse_class() {
    const size_t at = p_++;
    Element e;
    if (p_ < t_.size() && t_[p_] == '^') ++p_, e.negated = true;
    while (true) {
      if (p_ >= t_.size()) fail(at, "unterminated character class");
      if (t_[p_] == ']') break;
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (p_ + 1 < t_.size() && t_[p_] == '-' && t_[p_ + 1] != ']') {
        ++p_;
        hi = parse_char();
        if (hi < lo) fail(at, "character range with its end before its start");
      }
      e.ranges.push_back({lo, hi});
    }
    ++p_;
    std::sort(e.ranges.begin(), e.ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
    return e;
  }

  // One (possibly escaped) UTF-8 character inside a literal or class.
  uint32_t parse_char() {
    const size_t at = p_;
    const uint8_t c = uint8_t(t_[p_]);
    if (c == '\\') {
      if (p_ + 1 >= t_.size()) fail(at, "unfinished escape");
      const char k = t_[p_ + 1];
      p_ += 2;
      switch (k) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case ']': case '[': case '-': case '^': return uint32_t(uint8_t(k));
        case 'x': return parse_hex(at, 2);
        case 'u': return parse_hex(at, 4);
        case 'U': return parse_hex(at, 8);
        default: fail(at, std::string("unknown escape '\\") + k + "'");
      }
    }
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || p_ + size_t(len) > t_.size()) fail(at, "invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      const uint8_t cc = uint8_t(t_[p_ + size_t(k)]);
      if ((cc & 0xC0) != 0x80) fail(at, "invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    p_ += size_t(len);
    return cp;
  }

  uint32_t parse_hex(size_t at, int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++p_) {
      if (p_ >= t_.size()) fail(at, "unfinished hex escape");
      const char h = t_[p_];
      const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) fail(at, "bad hex digit in escape");
      v = v * 16 + uint32_t(d);
    }
    if (v > 0x10FFFF) fail(at, "code point beyond U+10FFFF");
    return v;
  }

  // A rule whose leftmost symbol can lead back to itself without consuming input would loop the
  // matcher forever; refuse it, naming the rule.
  void check_left_recursion() const {
    const size_t n = g_.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : g_.rules[r].alternatives) {
          bool all = true;
          for (const auto& e : alt) all = all && e.kind == Element::Kind::rule && nullable[size_t(e.id)];
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<int32_t>> left(n);
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : g_.rules[r].alternatives)
        for (const auto& e : alt) {
          if (e.kind != Element::Kind::rule) break;
          left[r].push_back(e.id);
          if (!nullable[size_t(e.id)]) break;
        }
    std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
    for (size_t start = 0; start < n; ++start) {
      if (state[start]) continue;
      std::vector<std::pair<int32_t, size_t>> stack{{int32_t(start), 0}};
      state[start] = 1;
      while (!stack.empty()) {
        auto& [r, k] = stack.back();
        if (k < left[size_t(r)].size()) {
          const int32_t next = left[size_t(r)][k++];
          if (state[size_t(next)] == 1)
            throw Error("grammar: rule '" + g_.rules[size_t(next)].name +
                        "' is left-recursive (it can reach itself before reading any character)");
          if (state[size_t(next)] == 0) {
            state[size_t(next)] = 1;
            stack.push_back({next, 0});
          }
        } else {
          state[size_t(r)] = 2;
          stack.pop_back();
        }
      }
    }
  }

  std::string_view t_;
  size_t p_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  int generated_ = 0;
  int depth_ = 0;        // open '(' groups
  size_t copies_ = 0;    // elements written by repetition
};

}  // namespace

bool chars_match(const Element& e, uint32_t cp) {
  bool in = false;
  for (const auto& r : e.ranges) {
    if (cp < r.lo) break;  // ranges are sorted by lo
    if (cp <= r.hi) {
      in = true;
      break;
    }
  }
  return in != e.negated;
}

Grammar parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace g4::grammar
