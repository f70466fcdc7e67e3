// The streaming split agrees with text::parse_model_output on the whole text, for every way of
// cutting the text into pieces (markers split across pieces included).
#include <gtest/gtest.h>

#include "server/output_splitter.h"
#include "text/output_parser.h"

namespace g4::server {
namespace {

struct Joined {
  std::string content, reasoning;
  std::vector<text::ToolCall> calls;
};

Joined run(const std::string& text, size_t piece) {
  OutputSplitter s;
  Joined j;
  auto take = [&](OutputDelta d) {
    j.content += d.content;
    j.reasoning += d.reasoning;
    for (auto& c : d.tool_calls) j.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += piece) take(s.push(text.substr(i, piece)));
  take(s.finish());
  return j;
}

void expect_matches_parser(const std::string& text) {
  const text::ParsedOutput want = text::parse_model_output(text);
  for (size_t piece : {1, 2, 3, 5, 7, 1000}) {
    const Joined got = run(text, piece);
    EXPECT_EQ(got.content, want.content) << "piece " << piece << " text " << text;
    EXPECT_EQ(got.reasoning, want.thinking) << "piece " << piece << " text " << text;
    ASSERT_EQ(got.calls.size(), want.tool_calls.size()) << text;
    for (size_t i = 0; i < got.calls.size(); ++i) {
      EXPECT_EQ(got.calls[i].name, want.tool_calls[i].name);
      EXPECT_EQ(got.calls[i].arguments, want.tool_calls[i].arguments);
      EXPECT_EQ(got.calls[i].ok(), want.tool_calls[i].ok());
    }
  }
}

TEST(OutputSplitter, MatchesTheWholeTextParser) {
  expect_matches_parser("Hello, world.");
  expect_matches_parser("  padded answer \n\n");
  expect_matches_parser("<|channel>thought\nLet me think.\n<channel|>The answer is 4.");
  expect_matches_parser("<|channel>thought\nunclosed thinking");
  expect_matches_parser("<|channel>thought<channel|>Answer");
  expect_matches_parser("<|channel>thought\nA<channel|>mid<|channel>thought\nB<channel|> end ");
  expect_matches_parser("Sure.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>");
  expect_matches_parser("<|tool_call>call:a{x:1}<tool_call|><|tool_call>call:b{y:2}<tool_call|>");
  expect_matches_parser("<|tool_call>call:broken{x:");
  expect_matches_parser("a < b and c <| d <|channe not a marker");
  expect_matches_parser("text<|tool_response>");
}

TEST(OutputSplitter, HoldsBackAPartialMarker) {
  OutputSplitter s;
  EXPECT_EQ(s.push("Hi <|chan").content, "Hi");
  OutputDelta d = s.push("nel>thought\nhmm");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.reasoning, "hmm");
  d = s.push("<channel|> ok");
  d = s.finish();
  (void)d;
}

TEST(OutputSplitter, ToolCallComesOutWhenClosed) {
  OutputSplitter s;
  EXPECT_TRUE(s.push("<|tool_call>call:f{a:").tool_calls.empty());
  OutputDelta d = s.push("1}<tool_call|>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments["a"], 1);
}

}  // namespace
}  // namespace g4::server
