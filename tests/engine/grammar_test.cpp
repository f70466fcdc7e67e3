// The grammar parser and the token-mask matcher. The mask (cached per context, uncertain tokens
// re-checked) is held against the matcher's own one-token advance for every token of the
// vocabulary at every step of random walks: the two share the automaton but not the trie walk,
// the context truncation or the cache, which is where masks go wrong.
#include <gtest/gtest.h>

#include <random>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "platform/error.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace g4::grammar {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, ParseErrorsNameLineColumnAndRule) {
  EXPECT_NE(error_of("root ::= \"a\" foo").find("rule 'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nx ::= [b").find("grammar line 2 col 7: unterminated character class"),
            std::string::npos);
  EXPECT_NE(error_of("a ::= \"x\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("'root' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"\" | root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{5000}").find("over 1000"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= <[x]>").find("<[ID]>"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" | [b-d]+ x? # comment\nx ::= <[7]> .{1,3}"), "");
}

TEST(Gbnf, TextRoundTrips) {
  const Grammar g = parse_gbnf("root ::= \"a\\n\" [^x-z\\]] ( b | \"é\" )* <[5]>\nb ::= . [\\u00e9]{2,3}");
  const Grammar again = parse_gbnf(g.to_text());
  auto lines = [](const std::string& t) {  // the same rules, in whatever order they were created
    std::vector<std::string> out;
    for (size_t b = 0, e; b < t.size(); b = e + 1) out.push_back(t.substr(b, (e = t.find('\n', b)) - b));
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(lines(g.to_text()), lines(again.to_text()));
  EXPECT_EQ(g.rules.size(), 5u);
}

TEST(Gbnf, LiteralMatchesExactlyItsBytes) {
  const std::string s = "a\"b\\c\nd\te\x01\x7F\xc3\xa9";  // quote, backslash, controls, DEL, é
  const Grammar g = parse_gbnf("root ::= " + gbnf_literal(s));
  const std::vector<uint32_t> want = {'a', '"', 'b', '\\', 'c', '\n', 'd', '\t', 'e', 1, 0x7F, 0xE9};
  ASSERT_EQ(g.rules[0].alternatives[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& e = g.rules[0].alternatives[0][i];
    EXPECT_TRUE(!e.negated && e.ranges.size() == 1 && e.ranges[0].lo == want[i] && e.ranges[0].hi == want[i]) << i;
  }
}

// A small vocabulary: single characters, multi-character tokens that cross grammar symbols,
// the UTF-8 bytes of 'é' and '中' as byte tokens, and two special tokens.
std::shared_ptr<const GrammarVocab> small_vocab() {
  std::vector<std::string> b = {"", "", "{", "}", "\"", "a", "b", ":", ",", " ", "\n", "1", "2", "-", ".",
                                "{\"", "\":", "\",", "ab", "ba", "\"}", "}\n", "12", "\xc3", "\xa9", "\xe4", "\xb8",
                                "\xad", "é", "中", "\\", "\\\"", "null", "true", "e", "E", "0", "[", "]", "[\"", "\"]"};
  std::vector<bool> special(b.size(), false);
  special[0] = special[1] = true;  // 0: an end token, 1: a special token a grammar may name
  return std::make_shared<const GrammarVocab>(b, special);
}

// At every step: mask == {t : a copy of the matcher accepts t} (plus the end token where the
// grammar may end); then a random allowed token. Returns the text of the walk.
std::string check_walk(const std::shared_ptr<CompiledGrammar>& g, std::mt19937& rng, int steps, int end_token) {
  GrammarMatcher m(g);
  TokenMask mask;
  std::string text;
  const std::vector<int> ends = {end_token};
  for (int step = 0; step < steps; ++step) {
    m.fill_mask(mask, ends);
    std::vector<int> allowed;
    for (int t = 0; t < g->vocab().size(); ++t) {
      bool ok;
      if (t == end_token) {
        ok = m.can_end();
      } else {
        GrammarMatcher copy = m;
        ok = copy.accept(t);
      }
      EXPECT_EQ(mask.test(t), ok) << "token " << t << " after \"" << text << "\"";
      if (ok) allowed.push_back(t);
    }
    if (allowed.empty() || ::testing::Test::HasFailure()) break;
    const int t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (t == end_token) break;
    EXPECT_TRUE(m.accept(t));
    text += g->vocab().special(t) ? "<" + std::to_string(t) + ">" : g->vocab().bytes(t);
  }
  return text;
}

TEST(GrammarMatcher, MaskAgreesWithAcceptOnSmallVocab) {
  auto vocab = small_vocab();
  const std::vector<std::string> grammars = {
      json_object_gbnf(),
      "root ::= \"{\" ( \"\\\"a\\\":\" v ( \",\\\"b\\\":\" v )? ) \"}\"\nv ::= [0-9]+ | \"null\" | \"\\\"\" [^\"]* \"\\\"\"",
      "root ::= ( [a-b]{2} | \"é\" | \"中\" ) <[1]> [ab]* \"}\"",
      "root ::= x x x\nx ::= \"a\" | \"ab\" | \"b\" | \"\"",
  };
  std::mt19937 rng(7);
  for (const auto& text : grammars) {
    auto g = std::make_shared<CompiledGrammar>(parse_gbnf(text), vocab);
    for (int walk = 0; walk < 25; ++walk) check_walk(g, rng, 40, 0);
    ASSERT_FALSE(HasFailure()) << text;
  }
}

TEST(GrammarMatcher, SpecialTokenTerminalsAndEnd) {
  auto vocab = small_vocab();
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"a\" <[1]>"), vocab);
  GrammarMatcher m(g);
  TokenMask mask;
  const std::vector<int> ends = {0};
  m.fill_mask(mask, ends);
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(5));
  EXPECT_FALSE(m.accept(1));
  EXPECT_TRUE(m.accept(5));
  m.fill_mask(mask, ends);
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(1));
  EXPECT_TRUE(m.accept(1));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.can_continue());
  m.fill_mask(mask, ends);
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(0));
  // A terminal naming a token that is not special is refused when the grammar is bound.
  EXPECT_THROW(CompiledGrammar(parse_gbnf("root ::= <[5]>"), vocab), Error);
  EXPECT_THROW(CompiledGrammar(parse_gbnf("root ::= <[999]>"), vocab), Error);
}

TEST(GrammarMatcher, PartialUtf8FromByteTokens) {
  auto vocab = small_vocab();
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"中\" \"é\""), vocab);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept(23));  // 0xC3 starts 'é', not '中'
  EXPECT_TRUE(m.accept(25));   // 0xE4
  EXPECT_FALSE(m.can_end());
  TokenMask mask;
  m.fill_mask(mask, std::vector<int>{0});
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(26));  // 0xB8
  EXPECT_TRUE(m.accept(26));
  EXPECT_TRUE(m.accept(27));   // 0xAD: '中' complete
  EXPECT_TRUE(m.accept(28));   // "é" as one token
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, FullGemmaVocabularyMaskAgreesWithAccept) {
  const auto tok = text::Tokenizer::from_dir(test::fixtures_dir() / "tokenizer" / "gemma3");
  auto vocab = GrammarVocab::from_tokenizer(tok);
  ASSERT_GE(vocab->size(), 262144);
  const nlohmann::json schema = nlohmann::json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["x", "y z"]}},
                   "n": {"type": "integer"}},
    "required": ["name", "n"], "additionalProperties": false})");
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_gbnf(schema)), vocab);
  std::mt19937 rng(3);
  const int eos = 1;
  for (int walk = 0; walk < 3; ++walk) check_walk(g, rng, 12, eos);
}

}  // namespace
}  // namespace g4::grammar
