#include "text/output_parser.h"
#include "text/tool_syntax.h"

#include <gtest/gtest.h>

namespace g4::text {
namespace {

TEST(OutputParser, PlainAnswer) {
  const ParsedOutput p = parse_model_output("The sky is blue.<turn|>");
  EXPECT_EQ(p.content, "The sky is blue.");
  EXPECT_TRUE(p.thinking.empty());
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(OutputParser, ThinkingIsSplitFromTheAnswer) {
  const ParsedOutput p = parse_model_output("<|channel>thought\nRayleigh scattering.\n<channel|>Because of scattering.<turn|>");
  EXPECT_EQ(p.thinking, "Rayleigh scattering.");
  EXPECT_EQ(p.content, "Because of scattering.");
  const ParsedOutput open = parse_model_output("<|channel>thought\nstill thinking");
  EXPECT_EQ(open.thinking, "still thinking");
  EXPECT_EQ(open.content, "");
}

TEST(OutputParser, ToolCallsWithNestedArguments) {
  const ParsedOutput p = parse_model_output(
      "Let me check.<|tool_call>call:get_weather{city:<|\"|>Paris, FR<|\"|>,days:2,temp:-1.5,ok:true,none:null,"
      "opts:{<|\"|>a key<|\"|>:[1,<|\"|>x<|\"|>,{b:false}]}}<tool_call|><|tool_call>call:noop{}<tool_call|><|tool_response>");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  const ToolCall& c = p.tool_calls[0];
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.name, "get_weather");
  // Members in the order the model wrote them (not sorted: "city" before "days" before "temp"
  // before "ok"), as a forced call follows its schema's declared order.
  EXPECT_EQ(c.arguments.dump(),
            R"({"city":"Paris, FR","days":2,"temp":-1.5,"ok":true,"none":null,"opts":{"a key":[1,"x",{"b":false}]}})");
  EXPECT_EQ(p.tool_calls[1].name, "noop");
  EXPECT_EQ(p.tool_calls[1].arguments, nlohmann::ordered_json::object());
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(tool_call_json(c)["name"], "get_weather");
}

TEST(OutputParser, ArgumentsKeepTheOrderTheyWereWrittenIn) {
  const ParsedOutput p = parse_model_output("<|tool_call>call:f{zname:<|\"|>Zoe<|\"|>,adult:true,o:{z:1,a:[{y:2,b:3}]}}<tool_call|>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  ASSERT_TRUE(p.tool_calls[0].ok()) << p.tool_calls[0].error;
  EXPECT_EQ(p.tool_calls[0].arguments.dump(), R"({"zname":"Zoe","adult":true,"o":{"z":1,"a":[{"y":2,"b":3}]}})");
}

TEST(OutputParser, MalformedCallsBecomeErrorObjects) {
  const char* bad[] = {
      "<|tool_call>get_weather{}<tool_call|>",             // no call:
      "<|tool_call>call:{a:1}<tool_call|>",                // no name
      "<|tool_call>call:f(a=1)<tool_call|>",               // not braces
      "<|tool_call>call:f{a:<|\"|>open}<tool_call|>",      // unterminated string
      "<|tool_call>call:f{a 1}<tool_call|>",               // missing colon
      "<|tool_call>call:f{a:1,}<tool_call|>",              // dangling comma
      "<|tool_call>call:f{a:nope}<tool_call|>",            // bare word
      "<|tool_call>call:f{a:1}}<tool_call|>",              // trailing text
      "<|tool_call>call:f{a:[1,2}<tool_call|>",            // bad array
      "<|tool_call>call:f{a:1",                            // cut off
  };
  for (const char* text : bad) {
    const ParsedOutput p = parse_model_output(text);
    ASSERT_EQ(p.tool_calls.size(), 1u) << text;
    EXPECT_FALSE(p.tool_calls[0].ok()) << text;
    const auto j = tool_call_json(p.tool_calls[0]);
    ASSERT_TRUE(j.contains("error")) << text;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(j["error"].contains("raw"));
  }
}

// A value cut anywhere converts to a prefix of the JSON of the whole value (no number is cut
// here: an unfinished number is written as it stands, a finished one normalised), and a whole
// value converts to exactly parse_tool_value + dump(). A <|"|> cut at the end is left out.
TEST(ToolValueJsonPrefix, EveryCutIsAPrefixOfTheWholeValue) {
  const std::string text =
      "{zname:<|\"|>Zo\"e\n<|\"|>, adult : true,<|\"|>a key<|\"|>:[1,{y:null,x:<|\"|><|\"|>}],\"q\":\"a\\\"b\",n:-2}";
  size_t pos = 0;
  const std::string whole = parse_tool_value(text, pos).dump();
  ASSERT_EQ(whole, R"({"zname":"Zo\"e\n","adult":true,"a key":[1,{"y":null,"x":""}],"q":"a\"b","n":-2})");
  EXPECT_EQ(tool_value_json_prefix(text), whole);
  for (size_t k = 0; k < text.size(); ++k) {
    const std::string cut = tool_value_json_prefix(text.substr(0, k));
    EXPECT_EQ(whole.substr(0, cut.size()), cut) << "cut after " << k << " bytes: " << text.substr(0, k);
  }
  EXPECT_EQ(tool_value_json_prefix("{city:<|\"|>Par"), R"({"city":"Par)");
  EXPECT_EQ(tool_value_json_prefix("{city:<|\"|>Paris<|\""), R"({"city":"Paris)");
  EXPECT_EQ(tool_value_json_prefix("{city:<|"), R"({"city":)");
  EXPECT_EQ(tool_value_json_prefix("{days:1.50,t:tr"), R"({"days":1.5,"t":tr)");
  EXPECT_EQ(tool_value_json_prefix("{a:1} trailing"), R"({"a":1})");
}

TEST(OutputParser, CutToolCallKeepsWhatWasWritten) {
  ToolCall c = parse_cut_tool_call("call:get_weather{city:<|\"|>Par");
  EXPECT_TRUE(c.ok() && c.cut) << c.error;
  EXPECT_EQ(c.name, "get_weather");
  EXPECT_EQ(c.arguments_json(), R"({"city":"Par)");
  c = parse_cut_tool_call("call:get_weather{city:<|\"|>Paris<|\"|>}");  // arguments done, <tool_call|> not
  EXPECT_EQ(c.arguments_json(), R"({"city":"Paris"})");
  c = parse_cut_tool_call("call:get_wea");
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.name, "get_wea");
  EXPECT_EQ(c.arguments_json(), "");
  c = parse_cut_tool_call("cal");
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.name, "");
  c = parse_cut_tool_call("nonsense{a:1");  // not the start of a call: still the error it was
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(c.unterminated);
  // parse_model_output marks a call the output ends inside, for the server to decide.
  const ParsedOutput p = parse_model_output("<|tool_call>call:f{a:1");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_TRUE(p.tool_calls[0].unterminated);
  EXPECT_FALSE(p.tool_calls[0].ok());
}

TEST(OutputParser, ThinkingThenToolCall) {
  const ParsedOutput p = parse_model_output(
      "<|channel>thought\nNeed weather.<channel|><|tool_call>call:w{c:<|\"|>x<|\"|>}<tool_call|><|tool_response>");
  EXPECT_EQ(p.thinking, "Need weather.");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments["c"], "x");
  EXPECT_EQ(p.content, "");
}

}  // namespace
}  // namespace g4::text
