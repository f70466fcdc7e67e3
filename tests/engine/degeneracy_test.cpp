#include "engine/degeneracy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

struct Case {
  std::string id, category, text;
  std::vector<int> ids;
  std::vector<std::string> pieces;  // decoded text of each token
};

// "▁" is the tokenizer's space; "<0xNN>" byte tokens decode to that byte.
std::string piece_text(const std::string& token) {
  if (token.size() == 6 && token.starts_with("<0x") && token.back() == '>')
    return std::string(1, char(std::stoi(token.substr(3, 2), nullptr, 16)));
  std::string out;
  const std::string space = "\xE2\x96\x81";
  for (size_t i = 0; i < token.size();) {
    if (token.compare(i, space.size(), space) == 0) {
      out += ' ';
      i += space.size();
    } else {
      out += token[i++];
    }
  }
  return out;
}

const std::vector<Case>& fixture_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    std::ifstream in(test::fixtures_dir() / "tokenizer" / "gemma3_cases.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line);
      Case c{j.at("id"), j.at("category"), j.at("text"), j.at("ids").get<std::vector<int>>(), {}};
      for (const auto& token : j.at("tokens")) c.pieces.push_back(piece_text(token.get<std::string>()));
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

DegeneracyVerdict run(const std::vector<int>& ids, const std::vector<std::string>& pieces = {},
                      const std::vector<int>& prompt = {}) {
  DegeneracyGuard guard(prompt);
  for (size_t i = 0; i < ids.size(); ++i) guard.observe(ids[i], i < pieces.size() ? pieces[i] : std::string());
  return guard.verdict();
}

std::vector<int> concat_category_ids(std::initializer_list<std::string> categories, std::vector<std::string>* pieces) {
  std::vector<int> ids;
  for (const auto& c : fixture_cases()) {
    for (const auto& want : categories) {
      if (c.category != want) continue;
      ids.insert(ids.end(), c.ids.begin(), c.ids.end());
      if (pieces) pieces->insert(pieces->end(), c.pieces.begin(), c.pieces.end());
    }
  }
  return ids;
}

TEST(DegeneracyFixtures, Loaded) {
  ASSERT_GT(fixture_cases().size(), 150u) << "missing " << (test::fixtures_dir() / "tokenizer" / "gemma3_cases.jsonl");
}

TEST(DegeneracyGuard, CleanFixtureTextIsNeverFlagged) {
  int checked = 0;
  for (const auto& c : fixture_cases()) {
    if (c.category == "long") continue;  // deliberately repetitive; see the next test
    DegeneracyVerdict v = run(c.ids, c.pieces);
    EXPECT_FALSE(v.degenerate()) << c.id << " (" << c.category << "): " << v.detail;
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

TEST(DegeneracyGuard, LongCleanProseAndCodeAreNotFlagged) {
  // All English and code cases back to back: ~650 tokens of natural text that repeats common
  // words, a literary refrain ("it was the ... of times") and two duplicated sentences.
  std::vector<std::string> pieces;
  std::vector<int> ids = concat_category_ids({"english", "code"}, &pieces);
  ASSERT_GT(ids.size(), 500u);
  DegeneracyVerdict v = run(ids, pieces);
  EXPECT_FALSE(v.degenerate()) << v.detail;

  // Quoting the whole block once more verbatim is repetition, not a loop.
  std::vector<int> twice = ids;
  twice.insert(twice.end(), ids.begin(), ids.end());
  std::vector<std::string> twice_pieces = pieces;
  twice_pieces.insert(twice_pieces.end(), pieces.begin(), pieces.end());
  DegeneracyGuard guard;
  for (size_t i = 0; i < twice.size(); ++i) guard.observe(twice[i], twice_pieces[i]);
  EXPECT_FALSE(guard.verdict().degenerate()) << guard.verdict().detail;
  EXPECT_FALSE(guard.loop_certain());
}

TEST(DegeneracyGuard, LongFixtureRepetitionIsFlagged) {
  // The 'long' category is made of repeated units: each is degenerate as model output, except a
  // pair of 80-wide separator lines, which is exactly what the thresholds are meant to allow.
  const std::map<std::string, DegeneracyKind> expected = {
      {"s175", DegeneracyKind::single_char_collapse},  // 'a' x 1000
      {"s176", DegeneracyKind::token_loop},            // "abab..." as one token x 150
      {"s177", DegeneracyKind::repeated_ngram},        // a long word repeated
      {"s178", DegeneracyKind::repeated_ngram},        // URL path segment repeated
      {"s179", DegeneracyKind::repeated_ngram},        // base64 block repeated
      {"s180", DegeneracyKind::repeated_ngram},        // hex digits repeated
      {"s181", DegeneracyKind::repeated_ngram},        // ACGT repeated
      {"s182", DegeneracyKind::token_loop},            // 人工智能 x 100 as one token
      {"s183", DegeneracyKind::single_char_collapse},  // '-' x 200
      {"s184", DegeneracyKind::ok},                    // "=" x 80, "\n", "#" x 80
      {"s185", DegeneracyKind::repeated_ngram},        // lorem ipsum sentence x 30
  };
  int seen = 0;
  for (const auto& c : fixture_cases()) {
    if (c.category != "long") continue;
    ++seen;
    auto it = expected.find(c.id);
    ASSERT_NE(it, expected.end()) << "new long case " << c.id;
    DegeneracyVerdict v = run(c.ids, c.pieces);
    EXPECT_EQ(degeneracy_kind_name(v.kind), degeneracy_kind_name(it->second)) << c.id << ": " << v.detail;
  }
  EXPECT_EQ(seen, int(expected.size()));
}

TEST(DegeneracyGuard, SingleTokenRepeatedIsATokenLoop) {
  std::vector<int> ids = {818, 3823, 8864};  // "The quick brown"
  ids.insert(ids.end(), 50, 4799);
  DegeneracyVerdict v = run(ids);
  EXPECT_EQ(v.kind, DegeneracyKind::token_loop) << v.detail;
  EXPECT_EQ(v.span_start, 3);
  EXPECT_EQ(v.span_end, 53);
  EXPECT_EQ(v.repeats, 50);
  EXPECT_EQ(v.n, 1);
  EXPECT_NE(v.detail.find("4799"), std::string::npos) << v.detail;
}

TEST(DegeneracyGuard, PeriodTwoLoopIsARepeatedNgram) {
  // "a-a-a-a-..."
  std::vector<int> ids;
  std::vector<std::string> pieces;
  for (int i = 0; i < 20; ++i) {
    ids.insert(ids.end(), {236746, 236772});
    pieces.insert(pieces.end(), {"a", "-"});
  }
  DegeneracyVerdict v = run(ids, pieces);
  EXPECT_EQ(v.kind, DegeneracyKind::repeated_ngram) << v.detail;
  EXPECT_EQ(v.n, 2);
  EXPECT_EQ(v.repeats, 20);
  EXPECT_EQ(v.span_start, 0);
  EXPECT_EQ(v.span_end, 40);
}

TEST(DegeneracyGuard, FiveGramRepeatedTenTimes) {
  const auto& prose = fixture_cases().at(2).ids;  // "The quick brown fox ..." (10 tokens)
  std::vector<int> ids = prose;
  const std::vector<int> five = {506, 31770, 4799, 563, 12864};
  for (int i = 0; i < 10; ++i) ids.insert(ids.end(), five.begin(), five.end());
  DegeneracyVerdict v = run(ids);
  EXPECT_EQ(v.kind, DegeneracyKind::repeated_ngram) << v.detail;
  EXPECT_EQ(v.n, 5);
  EXPECT_EQ(v.repeats, 10);
  EXPECT_EQ(v.span_start, int64_t(prose.size()));
  EXPECT_EQ(v.span_end, int64_t(ids.size()));
}

TEST(DegeneracyGuard, AFewRepeatsInShortOutputAreFine) {
  EXPECT_FALSE(run({1, 2, 1, 2, 1, 2}).degenerate());               // "the cat the cat the cat"
  EXPECT_FALSE(run({5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}).degenerate());  // 12 zeros in a number
  std::vector<int> three_times;
  for (int i = 0; i < 3; ++i) three_times.insert(three_times.end(), {10, 11, 12, 13, 14, 15, 16});
  EXPECT_FALSE(run(three_times).degenerate());
}

TEST(DegeneracyGuard, LongLoopWithVariationIsCaughtByTheWindow) {
  // A 100-token "paragraph" (longer than any tail period checked) repeated with one changing
  // token per copy, so there is no exact cycle.
  std::vector<int> ids;
  for (int copy = 0; copy < 6; ++copy)
    for (int i = 0; i < 100; ++i) ids.push_back(i == 50 ? 5000 + copy : 1000 + i);
  DegeneracyVerdict v = run(ids);
  EXPECT_EQ(v.kind, DegeneracyKind::repeated_ngram) << v.detail;
  EXPECT_EQ(v.n, 8);
  EXPECT_GE(v.fraction, 0.6);
}

TEST(DegeneracyGuard, WhitespaceCollapse) {
  // Different whitespace tokens in an irregular order: no token loop, no cycle, just whitespace.
  const std::vector<std::pair<int, std::string>> ws = {{236743, " "}, {107, "\n"}, {138, "  "}, {108, "\n\n"}, {255968, "\t"}};
  std::vector<int> ids = {9259, 236764};  // "Hello,"
  std::vector<std::string> pieces = {"Hello", ","};
  uint32_t state = 12345;
  for (int i = 0; i < 40; ++i) {
    state = state * 1103515245u + 12345u;
    const auto& [id, text] = ws[(state >> 16) % ws.size()];
    ids.push_back(id);
    pieces.push_back(text);
  }
  DegeneracyVerdict v = run(ids, pieces);
  EXPECT_EQ(v.kind, DegeneracyKind::whitespace_collapse) << v.detail;
  EXPECT_EQ(v.span_start, 2);
  EXPECT_EQ(v.span_end, 42);
}

TEST(DegeneracyGuard, SingleCharacterCollapseAcrossDifferentTokens) {
  // 'x' as tokens of different lengths (and ids), irregularly: only the text shows the collapse.
  const std::vector<std::pair<int, std::string>> xs = {{1, "x"}, {2, "xx"}, {3, "xxxx"}, {4, "xxxxxxxx"}};
  std::vector<int> ids = {818};
  std::vector<std::string> pieces = {"The "};
  uint32_t state = 99;
  int64_t chars = 0;
  while (chars < 300) {
    state = state * 1103515245u + 12345u;
    const auto& [id, text] = xs[(state >> 16) % xs.size()];
    ids.push_back(id);
    pieces.push_back(text);
    chars += int64_t(text.size());
  }
  DegeneracyVerdict v = run(ids, pieces);
  EXPECT_EQ(v.kind, DegeneracyKind::single_char_collapse) << v.detail;
  EXPECT_EQ(v.repeats, chars);
  EXPECT_EQ(v.span_start, 1);
  EXPECT_NE(v.detail.find("'x'"), std::string::npos) << v.detail;
}

TEST(DegeneracyGuard, SingleCharacterCollapseWithSplitUtf8) {
  // "あ" (E3 81 82) delivered as byte-fallback pieces that split the character.
  DegeneracyGuard guard;
  for (int i = 0; i < 200; ++i) {
    guard.observe(10 + i % 3, "\xE3");
    guard.observe(20 + i % 5, "\x81\x82");
  }
  EXPECT_EQ(guard.verdict().kind, DegeneracyKind::single_char_collapse) << guard.verdict().detail;
  EXPECT_EQ(guard.verdict().repeats, 200);
}

TEST(DegeneracyGuard, PromptEchoedBack) {
  std::vector<int> prompt = concat_category_ids({"english"}, nullptr);
  ASSERT_GT(prompt.size(), 200u);
  std::vector<int> output = {9259, 236888};  // "Hello!" then the prompt verbatim
  output.insert(output.end(), prompt.begin(), prompt.end());
  DegeneracyVerdict v = run(output, {}, prompt);
  EXPECT_EQ(v.kind, DegeneracyKind::prompt_echo) << v.detail;
  EXPECT_GE(v.fraction, 0.95);
  EXPECT_GE(v.span_end - v.span_start, 100);
}

TEST(DegeneracyGuard, QuotingThePromptThenAnsweringIsNotEcho) {
  std::vector<int> prompt = concat_category_ids({"english"}, nullptr);
  std::vector<int> output(prompt.begin() + 20, prompt.begin() + 60);  // a 40-token quote
  std::vector<int> answer = concat_category_ids({"code"}, nullptr);
  output.insert(output.end(), answer.begin(), answer.end());
  DegeneracyVerdict v = run(output, {}, prompt);
  EXPECT_FALSE(v.degenerate()) << v.detail;
}

TEST(DegeneracyGuard, LoopCertainOnlyForLongLoops) {
  DegeneracyGuard same;
  for (int i = 0; i < 63; ++i) same.observe(7);
  EXPECT_FALSE(same.loop_certain());
  EXPECT_TRUE(same.verdict().degenerate());  // reported long before it is certain
  same.observe(7);
  EXPECT_TRUE(same.loop_certain());
  same.observe(8);  // the loop broke: no longer certain, but the finding stays
  EXPECT_FALSE(same.loop_certain());
  EXPECT_EQ(same.verdict().kind, DegeneracyKind::token_loop);
  EXPECT_EQ(same.verdict().repeats, 64);

  DegeneracyGuard cycle;
  int observed = 0;
  while (!cycle.loop_certain() && observed < 1000) cycle.observe(100 + observed++ % 3);
  EXPECT_EQ(observed, 128);  // period 3: 8 repeats and 128 tokens

  std::vector<std::string> pieces;
  std::vector<int> ids = concat_category_ids({"english", "code"}, &pieces);
  DegeneracyGuard clean;
  for (size_t i = 0; i < ids.size(); ++i) {
    clean.observe(ids[i], pieces[i]);
    ASSERT_FALSE(clean.loop_certain()) << "at token " << i;
  }
}

TEST(DegeneracyGuard, StateStaysBoundedAsOutputGrows) {
  std::vector<int> prompt = concat_category_ids({"english"}, nullptr);
  DegeneracyGuard guard(prompt);
  uint64_t state = 1;
  const auto next_id = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int((state >> 33) % 262144);
  };
  // Distinct random n-grams fill the window: the largest state the output can cause.
  for (int i = 0; i < 5000; ++i) guard.observe(next_id(), "word ");
  const size_t full_window = guard.state_bytes();
  size_t largest = 0;
  for (int i = 0; i < 200000; ++i) {
    // Mix in loops and whitespace so every detector's state is exercised.
    if (i % 1000 < 100) guard.observe(42, "\n");
    else guard.observe(next_id(), "w ");
    if (i % 997 == 0) largest = std::max(largest, guard.state_bytes());
  }
  EXPECT_EQ(guard.tokens_observed(), 205000);
  EXPECT_LE(largest, full_window);
  EXPECT_LE(guard.state_bytes(), full_window);
  // The documented bound: the fixed rings and window plus the prompt's n-grams, well under 1 MiB.
  EXPECT_LT(guard.state_bytes(), size_t(1) << 20);
}

TEST(DegeneracyGuard, VerdictToJson) {
  std::vector<int> ids(30, 5);
  nlohmann::json j = run(ids);
  EXPECT_EQ(j.at("kind"), "token_loop");
  EXPECT_EQ(j.at("degenerate"), true);
  EXPECT_EQ(j.at("span"), nlohmann::json::array({0, 30}));
  EXPECT_EQ(j.at("n"), 1);
  EXPECT_EQ(j.at("repeats"), 30);
  EXPECT_DOUBLE_EQ(j.at("fraction").get<double>(), 1.0);
  EXPECT_TRUE(j.at("detail").is_string());

  nlohmann::json ok = DegeneracyGuard().verdict();
  EXPECT_EQ(ok.at("kind"), "ok");
  EXPECT_EQ(ok.at("degenerate"), false);
}

TEST(DegeneracyGuard, FindingsListEveryKindMostSeriousFirst) {
  // 'a' as one token, 200 times: both a token loop and a one-character collapse.
  DegeneracyGuard guard;
  for (int i = 0; i < 200; ++i) guard.observe(236746, "a");
  auto all = guard.findings();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].kind, DegeneracyKind::single_char_collapse);
  EXPECT_EQ(all[1].kind, DegeneracyKind::token_loop);
  EXPECT_EQ(all[2].kind, DegeneracyKind::repeated_ngram);  // the window sees it too
  EXPECT_EQ(guard.verdict().kind, DegeneracyKind::single_char_collapse);
}

TEST(DegeneracyGuard, RejectsNonsensicalLimits) {
  DegeneracyLimits limits;
  limits.ngram_n = 0;
  EXPECT_THROW(DegeneracyGuard({}, limits), Error);
  limits = {};
  limits.max_cycle_period = 1;
  EXPECT_THROW(DegeneracyGuard({}, limits), Error);
}

}  // namespace
}  // namespace g4
