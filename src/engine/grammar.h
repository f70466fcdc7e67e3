// A context-free grammar over Unicode code points (plus whole special tokens), and its text form:
// a GBNF dialect (llama.cpp's grammar format), which every grammar source compiles to so that
// what constrains decoding can always be printed and read.
//
//   root   ::= "{" ws pair ( "," ws pair )* "}"     # rules: name ::= alternatives
//   pair   ::= [a-z]+ ":" ( num | "null" )          # "literal", [class], [^negated], rule refs
//   num    ::= "-"? [0-9]{1,16}                     # postfix * + ? {m} {m,} {m,n}, ( groups )
//   call   ::= <[48]> "call:" name <[49]>           # <[ID]>: exactly the special token ID
//
// Literals and classes take \n \r \t \\ \" \' \] \- \xHH \uHHHH \UHHHHHHHH escapes; '.' is any
// code point; '#' starts a comment. A rule ends where the next "name ::=" begins. The start rule
// is "root". Repetition and groups become rules of their own ("NAME-N"), so the matcher only
// ever sees sequences of terminals and references.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace g4::grammar {

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive code points
};

struct Element {
  enum class Kind : uint8_t { chars, rule, token };
  Kind kind = Kind::chars;
  bool negated = false;            // chars: any code point outside `ranges`
  std::vector<CharRange> ranges;   // chars
  int32_t id = -1;                 // rule: rule index; token: token id
};

using Alternative = std::vector<Element>;  // empty: matches nothing (epsilon)

struct Rule {
  std::string name;
  std::vector<Alternative> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;
  int32_t root = -1;
  std::string to_text() const;  // GBNF that parses back to the same rules
};

// Limits that keep a request's grammar from exhausting the server.
inline constexpr size_t kMaxGrammarBytes = 1 << 20;
inline constexpr size_t kMaxRules = 20000;
inline constexpr int kMaxRepeat = 1000;  // x{m,n}: m, n at most this
inline constexpr size_t kMaxElements = 1 << 20;  // elements repetition may write in all

// Parses GBNF text. Throws g4::Error "grammar line L col C: ..." naming what is wrong, or a rule
// that is used but never defined, or a left-recursive rule (the matcher could never advance it).
Grammar parse_gbnf(std::string_view text);

// A GBNF string literal ("...") matching exactly these UTF-8 bytes (quotes, backslashes and
// control characters escaped).
std::string gbnf_literal(std::string_view utf8);

// True when the code point matches a chars element.
bool chars_match(const Element& e, uint32_t cp);

}  // namespace g4::grammar
