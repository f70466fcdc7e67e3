#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace g4 {
namespace {

// Feeds pieces as tokens (ids 100, 101, ...) and collects what would be shown to the user.
struct Streamed {
  std::string shown;
  StopUpdate last;
  int updates = 0;
};

Streamed stream(StopMatcher& matcher, const std::vector<std::string>& pieces) {
  Streamed out;
  int id = 100;
  for (const auto& piece : pieces) {
    out.last = matcher.on_token(id++, piece);
    out.shown += out.last.text;
    ++out.updates;
    if (out.last.finished) break;
  }
  return out;
}

TEST(StopMatcher, NoStopsPassesTextThroughAtOnce) {
  StopMatcher m({}, {}, 100);
  EXPECT_EQ(m.on_token(1, "Hello").text, "Hello");
  EXPECT_EQ(m.on_token(2, ", world").text, ", world");
  EXPECT_FALSE(m.finished());
}

TEST(StopMatcher, StopStringSplitAcrossTwoAndThreePieces) {
  {
    StopMatcher m({"###"}, {}, 100);
    Streamed s = stream(m, {"Answer: 42", "#", "##", " ignored"});
    EXPECT_EQ(s.shown, "Answer: 42");
    EXPECT_TRUE(s.last.finished);
    EXPECT_EQ(s.last.reason, FinishReason::stop);
    EXPECT_EQ(s.last.matched_stop, "###");
    EXPECT_EQ(s.updates, 3);  // stopped on the third piece
  }
  {
    StopMatcher m({"<end>"}, {}, 100);
    Streamed s = stream(m, {"done <", "e", "nd> and more"});
    EXPECT_EQ(s.shown, "done ");
    EXPECT_EQ(s.last.matched_stop, "<end>");
  }
}

TEST(StopMatcher, HoldsBackOnlyAPossiblePrefix) {
  StopMatcher m({"STOP"}, {}, 100);
  StopUpdate u = m.on_token(1, "abcST");
  EXPECT_EQ(u.text, "abc");  // "ST" might start STOP
  EXPECT_EQ(m.held_back_bytes(), 2u);
  u = m.on_token(2, "ART");
  EXPECT_EQ(u.text, "START");  // not STOP after all: released
  EXPECT_EQ(m.held_back_bytes(), 0u);
  EXPECT_FALSE(u.finished);
}

TEST(StopMatcher, PartialPrefixThatFailsIsReleasedInOrder) {
  StopMatcher m({"\n\nUser:"}, {}, 100);
  Streamed s = stream(m, {"one", "\n", "\n", "Use", "ful", " things"});
  EXPECT_EQ(s.shown, "one\n\nUseful things");
  EXPECT_FALSE(m.finished());
}

TEST(StopMatcher, StopAtTheVeryStart) {
  StopMatcher m({"END"}, {}, 100);
  StopUpdate u = m.on_token(1, "END of story");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.matched_stop, "END");
}

TEST(StopMatcher, FirstCompletedStopWinsWhateverThePieces) {
  // "bc" completes before "abcd" does: in one piece or byte by byte, the answer is the same.
  for (auto pieces : std::vector<std::vector<std::string>>{{"xabcd"}, {"x", "a", "b", "c", "d"}, {"xab", "cd"}}) {
    StopMatcher m({"abcd", "bc"}, {}, 100);
    Streamed s = stream(m, pieces);
    EXPECT_EQ(s.shown, "xa");
    EXPECT_EQ(s.last.matched_stop, "bc");
  }
  // Same end: the one starting first (longer) wins.
  StopMatcher m({"cd", "bcd"}, {}, 100);
  Streamed s = stream(m, {"abcde"});
  EXPECT_EQ(s.shown, "a");
  EXPECT_EQ(s.last.matched_stop, "bcd");
}

TEST(StopMatcher, MultipleStopStrings) {
  StopMatcher m({"</answer>", "Observation:", "\n\n\n"}, {}, 100);
  Streamed s = stream(m, {"Thought: look it up\n", "Observ", "ation: 3"});
  EXPECT_EQ(s.shown, "Thought: look it up\n");
  EXPECT_EQ(s.last.matched_stop, "Observation:");
}

TEST(StopMatcher, MultibyteUtf8StopsAndPieces) {
  {
    // "。" is 3 bytes; a byte-fallback tokenizer may deliver it one byte at a time.
    StopMatcher m({"。"}, {}, 100);
    Streamed s = stream(m, {"こんにちは", "\xE3", "\x80", "\x82", "さようなら"});
    EXPECT_EQ(s.shown, "こんにちは");
    EXPECT_EQ(s.last.matched_stop, "。");
  }
  {
    StopMatcher m({"終わり"}, {}, 100);
    StopUpdate u = m.on_token(1, "物語の終");
    EXPECT_EQ(u.text, "物語の");  // the held-back prefix is a whole character
    u = m.on_token(2, "盤");      // 終盤 is not 終わり
    EXPECT_EQ(u.text, "終盤");
    Streamed s = stream(m, {"。終わ", "り！"});
    EXPECT_EQ(s.shown, "。");
    EXPECT_TRUE(m.finished());
  }
  {
    // Emoji (4 bytes) split inside the stop string's first character.
    StopMatcher m({"🙂 bye"}, {}, 100);
    Streamed s = stream(m, {"ok \xF0\x9F", "\x99\x82", " b", "ye now"});
    EXPECT_EQ(s.shown, "ok ");
  }
}

TEST(StopMatcher, StopTokenIsNotEmittedAndReleasesHeldText) {
  StopMatcher m({"<end_of_turn>"}, {1, 106}, 100);
  StopUpdate u = m.on_token(5, "Bye <end");
  EXPECT_EQ(u.text, "Bye ");
  u = m.on_token(106, "<end_of_turn>");  // the token's own text never shows
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.reason, FinishReason::stop);
  EXPECT_EQ(u.matched_token, 106);
  EXPECT_EQ(u.matched_stop, "");
  EXPECT_EQ(u.text, "<end");  // held back as a possible prefix; the sequence is over, so it is text
  EXPECT_EQ(finish_reason_name(m.finish_reason()), "stop");
}

TEST(StopMatcher, MaxTokensFinishesWithLengthAndFlushes) {
  StopMatcher m({"STOP"}, {}, 3);
  EXPECT_EQ(m.on_token(1, "a").text, "a");
  EXPECT_EQ(m.on_token(2, "b").text, "b");
  StopUpdate u = m.on_token(3, "cST");
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.reason, FinishReason::length);
  EXPECT_EQ(u.text, "cST");
  EXPECT_EQ(finish_reason_name(u.reason), "length");
  // Finished: later tokens change nothing.
  u = m.on_token(4, "more");
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.text, "");
  EXPECT_EQ(m.tokens_seen(), 3);
}

TEST(StopMatcher, StopStringOnTheLastAllowedTokenIsStopNotLength) {
  StopMatcher m({"!"}, {}, 2);
  m.on_token(1, "hi");
  StopUpdate u = m.on_token(2, "!");
  EXPECT_EQ(u.reason, FinishReason::stop);
  EXPECT_EQ(u.text, "");
}

TEST(StopMatcher, BuildsFromSamplingParamsAndFlushes) {
  SamplingParams p;
  p.stop_strings = {"\nQ:"};
  p.stop_token_ids = {1};
  p.max_tokens = 10;
  StopMatcher m(p);
  EXPECT_EQ(m.on_token(7, "A: yes\n").text, "A: yes");
  EXPECT_EQ(m.flush(), "\n");  // the generator ended the sequence itself
  EXPECT_EQ(m.on_token(1, "").reason, FinishReason::stop);
}

TEST(StopMatcher, OnTextMatchesWithoutCountingTokens) {
  StopMatcher m({"xyz"}, {}, 1);
  EXPECT_EQ(m.on_text("aaxy").text, "aa");
  EXPECT_EQ(m.on_text("q").text, "xyq");
  EXPECT_EQ(m.tokens_seen(), 0);
  EXPECT_FALSE(m.finished());
}

}  // namespace
}  // namespace g4
