#include "text/chat_template.h"

#include <gtest/gtest.h>

#include "gemma3_tokenizer.h"
#include "platform/error.h"
#include "text/synth_tokenizer.h"

namespace g4::text {
namespace {

using json = nlohmann::json;

std::string render(const json& messages, const json& tools = nullptr, ChatOptions o = {}) {
  return render_chat(messages, tools, o);
}

TEST(ChatTemplate, UserOnlyHasNoSystemTurn) {
  EXPECT_EQ(render(json::parse(R"([{"role":"user","content":"  Hello.  "}])")),
            "<bos><|turn>user\nHello.<turn|>\n<|turn>model\n");
  ChatOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(render(json::parse(R"([{"role":"user","content":"Hi"}])"), nullptr, no_prompt),
            "<bos><|turn>user\nHi<turn|>\n");
}

TEST(ChatTemplate, SystemAndDeveloperBecomeASystemTurn) {
  const std::string want =
      "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n<|turn>user\nHello.<turn|>\n<|turn>model\n";
  EXPECT_EQ(render(json::parse(R"([{"role":"system","content":"You are a helpful assistant.\n"},
                                   {"role":"user","content":"Hello."}])")), want);
  EXPECT_EQ(render(json::parse(R"([{"role":"developer","content":"You are a helpful assistant."},
                                   {"role":"user","content":"Hello."}])")), want);
  // Parts: each text trimmed and followed by a space, as the template does.
  EXPECT_EQ(render(json::parse(R"([{"role":"system","content":[{"type":"text","text":"A "},{"type":"text","text":"B"}]},
                                   {"role":"user","content":"x"}])")),
            "<bos><|turn>system\nA B <turn|>\n<|turn>user\nx<turn|>\n<|turn>model\n");
}

TEST(ChatTemplate, ThinkingOnAndEmptyThoughtVariant) {
  ChatOptions think;
  think.enable_thinking = true;
  EXPECT_EQ(render(json::parse(R"([{"role":"user","content":"Why?"}])"), nullptr, think),
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWhy?<turn|>\n<|turn>model\n");
  ChatOptions big;
  big.empty_thought_when_not_thinking = true;
  EXPECT_EQ(render(json::parse(R"([{"role":"user","content":"Why?"}])"), nullptr, big),
            "<bos><|turn>user\nWhy?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatTemplate, AssistantIsModelAndEarlierThoughtsAreStripped) {
  const json msgs = json::parse(R"([
    {"role":"user","content":"Hi"},
    {"role":"assistant","content":"<|channel>thought\nthink hard<channel|>Hello there.","reasoning_content":"old"},
    {"role":"user","content":"Bye"}])");
  EXPECT_EQ(render(msgs), "<bos><|turn>user\nHi<turn|>\n<|turn>model\nHello there.<turn|>\n<|turn>user\nBye<turn|>\n<|turn>model\n");
  // Reasoning after the last user message is kept (the model is continuing it).
  const json cont = json::parse(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"A","reasoning":"r"}])");
  ChatOptions o;
  o.add_generation_prompt = false;
  EXPECT_EQ(render(cont, nullptr, o), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\nr\n<channel|>A<turn|>\n");
}

TEST(ChatTemplate, MediaPartsBecomePlaceholders) {
  EXPECT_EQ(render(json::parse(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}},
      {"type":"text","text":" What is this? "},{"type":"input_audio"},{"type":"video"}]}])")),
            "<bos><|turn>user\n<|image|>What is this?<|audio|><|video|><turn|>\n<|turn>model\n");
}

const char* kWeatherTool = R"([{"type":"function","function":{"name":"get_weather","description":"Current weather",
  "parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},
  "unit":{"type":"string","enum":["C","F"]},"days":{"type":"integer"}},"required":["city"]}}}])";

TEST(ChatTemplate, ToolDeclarationsInTheSystemTurn) {
  const std::string out = render(json::parse(R"([{"role":"user","content":"Weather in Paris?"}])"), json::parse(kWeatherTool));
  EXPECT_EQ(out,
            "<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Current weather<|\"|>,parameters:{"
            "properties:{city:{description:<|\"|>City name<|\"|>,type:<|\"|>STRING<|\"|>},"
            "days:{type:<|\"|>INTEGER<|\"|>},"
            "unit:{enum:[<|\"|>C<|\"|>,<|\"|>F<|\"|>],type:<|\"|>STRING<|\"|>}},"
            "required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n"
            "<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n");
}

TEST(ChatTemplate, ToolCallsAndResponsesInOneModelTurn) {
  const json msgs = json::parse(R"([
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
       "function":{"name":"get_weather","arguments":"{\"unit\":\"C\",\"City\":\"Paris\",\"days\":2,\"ok\":true}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"sunny, 21C"}])");
  EXPECT_EQ(render(msgs, json::parse(kWeatherTool)).substr(0, 0), "");
  const std::string out = render(msgs);
  EXPECT_EQ(out,
            "<bos><|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
            "<|tool_call>call:get_weather{City:<|\"|>Paris<|\"|>,days:2,ok:true,unit:<|\"|>C<|\"|>}<tool_call|>"
            "<|tool_response>response:get_weather{value:<|\"|>sunny, 21C<|\"|>}<tool_response|>");
  // The turn stays open: no generation prompt after a tool response; with thinking, a thought opens.
  ChatOptions think;
  think.enable_thinking = true;
  EXPECT_EQ(render(msgs, nullptr, think).substr(render(msgs, nullptr, think).size() - 18), "<|channel>thought\n");

  // A final answer after the response continues the same model turn.
  json more = msgs;
  more.push_back({{"role", "assistant"}, {"content", "It is sunny."}});
  const std::string full = render(more);
  EXPECT_NE(full.find("<tool_response|>It is sunny.<turn|>\n<|turn>model\n"), std::string::npos) << full;
}

TEST(ChatTemplate, PendingToolCallEndsWithToolResponseMarker) {
  const json msgs = json::parse(R"([{"role":"user","content":"x"},
    {"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":{"B":[1,"s",null]}}}}]}])");
  EXPECT_EQ(render(msgs), "<bos><|turn>user\nx<turn|>\n<|turn>model\n<|tool_call>call:f{a:{B:[1,<|\"|>s<|\"|>,null]}}<tool_call|><|tool_response>");
}

TEST(ChatTemplate, LegacyToolResponsesField) {
  const json msgs = json::parse(R"([{"role":"user","content":"x"},
    {"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}],
     "tool_responses":[{"name":"f","response":{"temp":21,"sky":"clear"}}]}])");
  EXPECT_EQ(render(msgs), "<bos><|turn>user\nx<turn|>\n<|turn>model\n<|tool_call>call:f{}<tool_call|>"
                          "<|tool_response>response:f{sky:<|\"|>clear<|\"|>,temp:21}<tool_response|>");
}

TEST(ChatTemplate, MalformedMessagesAreRefused) {
  EXPECT_THROW(render(json::parse(R"({"role":"user"})")), Error);
  EXPECT_THROW(render(json::parse(R"([{"content":"x"}])")), Error);
  EXPECT_THROW(render(json::parse(R"([{"role":"user","content":5}])")), Error);
  EXPECT_THROW(render(json::parse(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}])")), Error);
}

TEST(ChatTemplate, EncodesWithExactlyOneBos) {
  g4::test::TempDir dir;
  write_synth_tokenizer(dir.path(), 2048);
  const Tokenizer t = Tokenizer::from_dir(dir.path());
  EXPECT_TRUE(missing_template_tokens(t.vocab()).empty());
  const auto ids = encode_chat(t, json::parse(R"([{"role":"user","content":"Hello."}])"), nullptr, chat_options_for(t.vocab()));
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 105);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  EXPECT_EQ(ids.back(), 107);
  EXPECT_THROW(encode_chat(t, json::parse(R"([{"role":"user","content":"<bos>"}])"), nullptr, {}), Error);
}

TEST(ChatTemplate, Gemma3VocabularyIsReportedAsLackingTheTokens) {
  const auto missing = missing_template_tokens(testing::gemma3().vocab());
  EXPECT_NE(std::find(missing.begin(), missing.end(), "<|turn>"), missing.end());
  EXPECT_THROW(encode_chat(testing::gemma3(), json::parse(R"([{"role":"user","content":"x"}])"), nullptr, {}), Error);
}

TEST(ChatTemplate, Gemma4PromptTokenizesLikeTheReferenceWithGemma4Ids) {
  // The fixture's s207 text (a Gemma 4 prompt) renders from messages exactly.
  EXPECT_EQ(render(json::parse(R"([{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello."}])")),
            "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n<|turn>user\nHello.<turn|>\n<|turn>model\n");
}

}  // namespace
}  // namespace g4::text
