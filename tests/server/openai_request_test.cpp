// Request parsing and validation: every refusal names the field and carries the right status.
#include <gtest/gtest.h>

#include "server/openai_request.h"

namespace g4::server {
namespace {

using nlohmann::json;

RequestLimits limits() {
  RequestLimits l;
  l.model_name = "tiny";
  l.vocab_size = 1000;
  l.max_context = 512;
  l.default_max_tokens = 64;
  return l;
}

json chat(json extra = json::object()) {
  json b = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

ApiError chat_error(const json& body) {
  auto r = parse_chat_request(body, limits());
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(OpenAiRequest, ParsesAFullChatRequest) {
  auto r = parse_chat_request(chat({{"max_tokens", 10},
                                     {"temperature", 0.5},
                                     {"top_p", 0.9},
                                     {"top_k", 40},
                                     {"min_p", 0.05},
                                     {"presence_penalty", 0.5},
                                     {"frequency_penalty", -0.5},
                                     {"seed", 7},
                                     {"stop", {"a", "b"}},
                                     {"logprobs", true},
                                     {"top_logprobs", 3},
                                     {"stream", true},
                                     {"stream_options", {{"include_usage", true}}},
                                     {"chat_template_kwargs", {{"enable_thinking", true}}}}),
                              limits());
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(r)) << error_body(std::get<ApiError>(r)).dump();
  const GenerationSpec& s = std::get<GenerationSpec>(r);
  EXPECT_EQ(s.sampling.max_tokens, 10);
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.5f);
  EXPECT_EQ(s.sampling.top_k, 40);
  EXPECT_EQ(s.sampling.seed, 7u);
  EXPECT_EQ(s.sampling.stop_strings, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.sampling.logprobs);
  EXPECT_EQ(s.sampling.top_logprobs, 3);
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
  EXPECT_TRUE(s.enable_thinking);
}

TEST(OpenAiRequest, DefaultsAndMaxCompletionTokens) {
  auto s = std::get<GenerationSpec>(parse_chat_request(chat(), limits()));
  EXPECT_EQ(s.sampling.max_tokens, 64);
  s = std::get<GenerationSpec>(parse_chat_request(chat({{"max_tokens", 5}, {"max_completion_tokens", 9}}), limits()));
  EXPECT_EQ(s.sampling.max_tokens, 9);
  s = std::get<GenerationSpec>(parse_chat_request(chat({{"max_tokens", nullptr}}), limits()));
  EXPECT_EQ(s.sampling.max_tokens, 64);  // null means "not set"
}

TEST(OpenAiRequest, RefusesBadFields) {
  struct Case {
    json extra;
    std::string param;
    int status;
  };
  const std::vector<Case> cases = {
      {{{"max_tokens", -1}}, "max_tokens", 400},
      {{{"max_tokens", 0}}, "max_tokens", 400},
      {{{"max_tokens", 1000000000}}, "max_tokens", 400},
      {{{"max_tokens", "ten"}}, "max_tokens", 400},
      {{{"max_tokens", 1.5}}, "max_tokens", 400},
      {{{"temperature", "hot"}}, "temperature", 400},
      {{{"temperature", 3}}, "temperature", 400},
      {{{"top_p", 0}}, "top_p", 400},
      {{{"top_k", -5}}, "top_k", 400},
      {{{"presence_penalty", 9}}, "presence_penalty", 400},
      {{{"seed", "x"}}, "seed", 400},
      {{{"n", 2}}, "n", 400},
      {{{"stop", 5}}, "stop", 400},
      {{{"stop", {""}}}, "stop", 400},
      {{{"logprobs", "yes"}}, "logprobs", 400},
      {{{"top_logprobs", 3}}, "top_logprobs", 400},  // without logprobs
      {{{"top_logprobs", 50}, {"logprobs", true}}, "top_logprobs", 400},
      {{{"stream", "yes"}}, "stream", 400},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options", 400},  // without stream
      {{{"model", "gpt-4"}}, "model", 404},
      {{{"model", 5}}, "model", 400},
      {{{"messages", "hi"}}, "messages", 400},
      {{{"messages", json::array()}}, "messages", 400},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role", 400},
      {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role", 400},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content", 400},
      {{{"tools", "x"}}, "tools", 400},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0]", 400},
      {{{"tool_choice", "sometimes"}}, "tool_choice", 400},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias", 400},
      {{{"logit_bias", {{"5", 500}}}}, "logit_bias", 400},
      {{{"reasoning_effort", "max"}}, "reasoning_effort", 400},
  };
  for (const auto& c : cases) {
    const ApiError e = chat_error(chat(c.extra));
    EXPECT_EQ(e.status, c.status) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump() << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(OpenAiRequest, MissingRequiredFields) {
  json b = chat();
  b.erase("model");
  EXPECT_EQ(chat_error(b).param, "model");
  b = chat();
  b.erase("messages");
  EXPECT_EQ(chat_error(b).param, "messages");
  auto r = parse_completion_request({{"model", "tiny"}}, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "prompt");
}

TEST(OpenAiRequest, ToolChoiceNamesAFunction) {
  json tools = {{{"type", "function"}, {"function", {{"name", "a"}}}}, {{"type", "function"}, {"function", {{"name", "b"}}}}};
  auto s = std::get<GenerationSpec>(parse_chat_request(
      chat({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "b"}}}}}}), limits()));
  ASSERT_EQ(s.tools.size(), 1u);
  EXPECT_EQ(s.tools[0]["function"]["name"], "b");
  s = std::get<GenerationSpec>(parse_chat_request(chat({{"tools", tools}, {"tool_choice", "none"}}), limits()));
  EXPECT_TRUE(s.tools.is_null());
  EXPECT_EQ(chat_error(chat({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "zz"}}}}}})).param,
            "tool_choice");
}

TEST(OpenAiRequest, CompletionPrompts) {
  auto s = std::get<GenerationSpec>(parse_completion_request({{"model", "tiny"}, {"prompt", "abc"}, {"logprobs", 2}}, limits()));
  EXPECT_EQ(s.prompt, "abc");
  EXPECT_TRUE(s.sampling.logprobs);
  EXPECT_EQ(s.sampling.top_logprobs, 2);
  s = std::get<GenerationSpec>(parse_completion_request({{"model", "tiny"}, {"prompt", {2, 5, 9}}}, limits()));
  EXPECT_TRUE(s.prompt_is_tokens);
  EXPECT_EQ(s.prompt_tokens, (std::vector<int>{2, 5, 9}));
  auto e = parse_completion_request({{"model", "tiny"}, {"prompt", {2, 5000}}}, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).param, "prompt");
  e = parse_completion_request({{"model", "tiny"}, {"prompt", {"a", "b"}}}, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  e = parse_completion_request({{"model", "tiny"}, {"prompt", 5}}, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
}

TEST(OpenAiRequest, JsonBodies) {
  EXPECT_TRUE(std::holds_alternative<RequestJson>(parse_json_object(R"({"a": 1})")));
  // Members stay in the order they were written (a schema's properties are generated in it).
  auto ordered = parse_json_object(R"({"zname": 1, "adult": {"z": 2, "b": 3}})");
  ASSERT_TRUE(std::holds_alternative<RequestJson>(ordered));
  EXPECT_EQ(std::get<RequestJson>(ordered).dump(), R"({"zname":1,"adult":{"z":2,"b":3}})");
  auto e = parse_json_object("{\"a\": ");
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).code, "invalid_json");
  e = parse_json_object("[1, 2]");
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  e = parse_json_object("");
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  e = parse_json_object("{\"a\": \"\xff\xfe\"}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).code, "invalid_utf8");
  EXPECT_NE(std::get<ApiError>(e).message.find("offset 7"), std::string::npos);
}

TEST(OpenAiRequest, Utf8Validation) {
  EXPECT_EQ(invalid_utf8_offset("héllo €𝄞"), std::string::npos);
  EXPECT_EQ(invalid_utf8_offset("ab\xc0\xaf"), 2u);        // overlong
  EXPECT_EQ(invalid_utf8_offset("\xed\xa0\x80"), 0u);      // surrogate
  EXPECT_EQ(invalid_utf8_offset("x\xe2\x82"), 1u);         // truncated
}

TEST(OpenAiRequest, PromptLength) {
  GenerationSpec s;
  EXPECT_TRUE(std::holds_alternative<std::monostate>(check_prompt_length(10, s, limits())));
  auto e = check_prompt_length(512, s, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).code, "context_length_exceeded");
}

TEST(OpenAiRequest, ErrorBodyShape) {
  const json b = error_body(bad_request("bad", "temperature", "invalid_value"));
  EXPECT_EQ(b["error"]["message"], "bad");
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "temperature");
  EXPECT_EQ(b["error"]["code"], "invalid_value");
  EXPECT_TRUE(error_body(ApiError{500, "x", "server_error", "", ""})["error"]["param"].is_null());
}

// tool_choice is enforced through the prompt: required starts a call, a named function starts
// that call; auto and none start nothing.
TEST(OpenAiRequest, ToolChoiceForcesTheCallPrefix) {
  RequestLimits lim;
  lim.model_name = "tiny";
  lim.vocab_size = 512;
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},
                                     {"type":"function","function":{"name":"get_time"}}])");
  json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", tools}};
  auto prefix_for = [&](const json& choice) {
    json b = body;
    if (!choice.is_null()) b["tool_choice"] = choice;
    auto r = parse_chat_request(b, lim);
    EXPECT_TRUE(std::holds_alternative<GenerationSpec>(r));
    return forced_tool_call_prefix(std::get<GenerationSpec>(r));
  };
  EXPECT_EQ(prefix_for(nullptr), "");
  EXPECT_EQ(prefix_for("auto"), "");
  EXPECT_EQ(prefix_for("none"), "");
  EXPECT_EQ(prefix_for("required"), "<|tool_call>call:");
  EXPECT_EQ(prefix_for({{"type", "function"}, {"function", {{"name", "get_time"}}}}), "<|tool_call>call:get_time{");
}

// The g4 extension object: speculative and draft_k are read, anything else in it is refused by
// name rather than ignored.
TEST(OpenAiRequest, G4ExtensionFieldsAreReadOrRefusedByName) {
  auto r = parse_chat_request(chat({{"g4", {{"speculative", "ngram"}, {"draft_k", 3}, {"deadline_ms", 500}}}}), limits());
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(r)) << error_body(std::get<ApiError>(r)).dump();
  const GenerationSpec& s = std::get<GenerationSpec>(r);
  ASSERT_TRUE(s.speculative.has_value());
  EXPECT_EQ(*s.speculative, SpecMode::Ngram);
  EXPECT_EQ(s.draft_k, 3);
  EXPECT_DOUBLE_EQ(s.deadline_seconds, 0.5);
  for (const auto& [ext, param] : std::vector<std::pair<json, std::string>>{
           {{{"speculative", "eagle"}}, "g4.speculative"},
           {{{"speculative", 1}}, "g4.speculative"},
           {{{"draft_k", 0}}, "g4.draft_k"},
           {{{"draft_k", 2.5}}, "g4.draft_k"},
           {{{"draft_k", 17}}, "g4.draft_k"},
           {{{"max_image_tokens", 100}}, "g4.max_image_tokens"},
           {{{"max_image_tokens", "high"}}, "g4.max_image_tokens"},
           {{{"max_image_budget", 70}}, "g4.max_image_budget"}}) {
    const ApiError e = chat_error(chat({{"g4", ext}}));
    EXPECT_EQ(e.status, 400) << ext.dump();
    EXPECT_EQ(e.param, param) << ext.dump();
  }
}

}  // namespace
}  // namespace g4::server
