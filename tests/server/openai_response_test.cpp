// Response building from engine events: final objects, SSE chunks, usage and the g4 field.
#include <gtest/gtest.h>

#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/readiness.h"
#include "test_util.h"
#include "text/synth_tokenizer.h"
#include "text/tokenizer.h"

namespace g4::server {
namespace {

using nlohmann::json;

GenerationEvent text_event(const std::string& t, int token = 5) {
  GenerationEvent e;
  e.text = t;
  e.tokens.push_back({token, -0.5f, {{token, -0.5f}, {token + 1, -1.5f}}});
  return e;
}

GenerationEvent finish_event(const std::string& reason, int64_t prompt, int64_t generated) {
  GenerationEvent e;
  e.finished = true;
  e.finish_reason = reason;
  e.prompt_tokens = prompt;
  e.generated_tokens = generated;
  return e;
}

ResponseContext chat_ctx() {
  ResponseContext c;
  c.endpoint = Endpoint::chat;
  c.id = "chatcmpl-test";
  c.model = "tiny";
  c.created = 1;
  return c;
}

TEST(OpenAiResponse, ChatFinalObject) {
  ResponseBuilder b(chat_ctx());
  b.on_event(text_event("<|channel>thought\nthink<channel|>"));
  b.on_event(text_event("Hello"));
  b.on_event(text_event(" world"));
  b.on_event(finish_event("length", 7, 3));
  ASSERT_TRUE(b.finished());
  const json r = b.final_response();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], "think");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 10);
  EXPECT_EQ(r["g4"]["degeneracy"]["kind"], "ok");
  EXPECT_TRUE(r["g4"].contains("timings"));
}

TEST(OpenAiResponse, ToolCallsSetFinishReason) {
  ResponseBuilder b(chat_ctx());
  auto chunks = b.on_event(text_event("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"));
  ASSERT_EQ(chunks.size(), 1u);
  const json& tc = chunks[0]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(tc["index"], 0);
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>())["city"], "Paris");
  b.on_event(finish_event("stop", 3, 9));
  const json r = b.final_response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["id"], tc["id"]);
}

// tool_choice naming a function: the prompt ends with "<|tool_call>call:get_weather{" and the
// model's output continues inside the call; the builder parses prefix + output as one call.
TEST(OpenAiResponse, ForcedToolCallPrefixIsPartOfTheCall) {
  ResponseContext c = chat_ctx();
  c.forced_prefix = "<|tool_call>call:get_weather{";
  ResponseBuilder b(c);
  b.on_event(text_event("city:<|\"|>Paris<|\"|>}<tool_call|>"));
  b.on_event(finish_event("stop", 3, 6));
  const json r = b.final_response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  const json& tc = r["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>())["city"], "Paris");
}

// max_tokens cutting a forced call short: the call comes back with what was generated, its
// arguments the JSON text so far, finish_reason "length" (as OpenAI does), in the stream's last
// delta and in the final object; it is not a tool_call_error. Cut on "stop" (a stop string, say)
// it stays the malformed call it is.
TEST(OpenAiResponse, ToolCallCutByMaxTokensKeepsWhatWasGenerated) {
  ResponseContext c = chat_ctx();
  c.forced_prefix = "<|tool_call>call:get_weather{";
  ResponseBuilder b(c);
  EXPECT_TRUE(b.on_event(text_event("city:<|\"|>Par")).empty());  // nothing is shown until the call ends
  const auto chunks = b.on_event(finish_event("length", 3, 2));
  ASSERT_EQ(chunks.size(), 2u);
  const json& delta = chunks[0]["choices"][0]["delta"];
  ASSERT_TRUE(delta.contains("tool_calls")) << chunks[0];
  EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(delta["tool_calls"][0]["function"]["arguments"], R"({"city":"Par)");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "length");
  const json r = b.final_response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
  ASSERT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u) << r;
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"city":"Par)");
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["id"], delta["tool_calls"][0]["id"]);
  EXPECT_FALSE(r["g4"].contains("tool_call_errors")) << r;

  ResponseBuilder stopped(c);
  stopped.on_event(text_event("city:<|\"|>Par"));
  stopped.on_event(finish_event("stop", 3, 2));
  const json s = stopped.final_response();
  EXPECT_FALSE(s["choices"][0]["message"].contains("tool_calls")) << s;
  EXPECT_TRUE(s["g4"].contains("tool_call_errors")) << s;
}

TEST(OpenAiResponse, MalformedToolCallIsReportedNotHidden) {
  ResponseBuilder b(chat_ctx());
  b.on_event(text_event("<|tool_call>nonsense<tool_call|>"));
  b.on_event(finish_event("stop", 3, 9));
  const json r = b.final_response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  ASSERT_TRUE(r["g4"].contains("tool_call_errors"));
}

TEST(OpenAiResponse, StreamChunksEndWithG4AndUsage) {
  ResponseContext c = chat_ctx();
  c.include_usage = true;
  ResponseBuilder b(c);
  std::vector<json> all = b.opening_chunks();
  for (auto& x : b.on_event(text_event("Hi"))) all.push_back(x);
  GenerationEvent f = finish_event("stop", 4, 2);
  f.verdict.kind = DegeneracyKind::token_loop;
  for (auto& x : b.on_event(f)) all.push_back(x);
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(all[1]["choices"][0]["delta"]["content"], "Hi");
  const json& fin = all[all.size() - 2];
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(fin["g4"]["degeneracy"]["kind"], "token_loop");
  const json& last = all.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["total_tokens"], 6);
  EXPECT_EQ(last["g4"]["degeneracy"]["kind"], "token_loop");
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(OpenAiResponse, CompletionAndLogprobs) {
  test::TempDir dir;
  text::write_synth_tokenizer(dir.path(), 512);
  const text::Tokenizer tok = text::Tokenizer::from_dir(dir.path());
  ResponseContext c;
  c.endpoint = Endpoint::completion;
  c.id = "cmpl-x";
  c.model = "tiny";
  c.logprobs = true;
  c.top_logprobs = 1;
  c.tokenizer = &tok;
  c.stop_token_ids = {1};
  ResponseBuilder b(c);
  auto ch = b.on_event(text_event("ab", 300));
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0]["choices"][0]["text"], "ab");
  EXPECT_EQ(ch[0]["choices"][0]["logprobs"]["token_logprobs"][0], -0.5);
  GenerationEvent stop = text_event("", 1);  // the stop token: never shown, no logprob
  b.on_event(stop);
  b.on_event(finish_event("stop", 2, 2));
  const json r = b.final_response();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "ab");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["logprobs"]["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(b.tokens(), std::vector<int>{300});
}

TEST(Readiness, AssertsOnThePipelineAndOnlyEnforcesDegeneracyForRealCheckpoints) {
  test::TempDir dir;
  text::write_synth_tokenizer(dir.path(), 512);
  const text::Tokenizer tok = text::Tokenizer::from_dir(dir.path());
  ProbeObservation o;
  o.tokens = {300, 301, 302};
  o.text = tok.decode(std::vector<int32_t>{300, 301, 302});
  o.finish_reason = "length";
  o.generated_tokens = 3;
  ASSERT_FALSE(o.text.empty());
  EXPECT_TRUE(assess_probe(o, tok, false).passed);

  ProbeObservation loop = o;
  loop.verdict.kind = DegeneracyKind::token_loop;
  EXPECT_FALSE(assess_probe(loop, tok, false).passed);
  EXPECT_NE(assess_probe(loop, tok, false).reason.find("not_degenerate"), std::string::npos);
  const ProbeResult synth = assess_probe(loop, tok, true);
  EXPECT_TRUE(synth.passed);  // reported, not enforced
  EXPECT_EQ(synth.report["degeneracy"]["kind"], "token_loop");

  ProbeObservation bad = o;
  bad.text += "x";  // the stream and the decoder disagree
  EXPECT_NE(assess_probe(bad, tok, true).reason.find("round_trip"), std::string::npos);
  bad = o;
  bad.finish_reason = "error";
  EXPECT_FALSE(assess_probe(bad, tok, true).passed);
  bad = o;
  bad.text = "\xff";
  EXPECT_FALSE(assess_probe(bad, tok, true).passed);
  bad = o;
  bad.text.clear();
  bad.tokens.clear();
  bad.generated_tokens = 0;
  EXPECT_FALSE(assess_probe(bad, tok, true).passed);

  ReadinessState st;
  EXPECT_EQ(st.response().first, 503);
  st.set(assess_probe(o, tok, false));
  EXPECT_EQ(st.response().first, 200);
  st.set(assess_probe(loop, tok, false));
  EXPECT_EQ(st.response().first, 503);  // a failed re-check takes readiness away
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.count_tokens(10, 5);
  m.observe_ttft(0.02);
  m.observe_inter_token(0.003);
  m.count_verdict("token_loop", true);
  MetricGauges g;
  g.queue_depth = 3;
  g.kv_cache_bytes = 50;
  g.kv_cache_capacity_bytes = 100;
  const std::string t = m.render(g);
  EXPECT_NE(t.find("g4_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2"), std::string::npos);
  EXPECT_NE(t.find("g4_http_requests_total{route=\"/v1/chat/completions\",status=\"400\"} 1"), std::string::npos);
  EXPECT_NE(t.find("g4_prompt_tokens_total 10"), std::string::npos);
  EXPECT_NE(t.find("g4_generated_tokens_total 5"), std::string::npos);
  EXPECT_NE(t.find("g4_time_to_first_token_seconds_bucket{le=\"0.025\"} 1"), std::string::npos);
  EXPECT_NE(t.find("g4_time_to_first_token_seconds_bucket{le=\"0.01\"} 0"), std::string::npos);
  EXPECT_NE(t.find("g4_inter_token_latency_seconds_count 1"), std::string::npos);
  EXPECT_NE(t.find("g4_degeneracy_verdicts_total{kind=\"token_loop\"} 1"), std::string::npos);
  EXPECT_NE(t.find("g4_degeneracy_verdicts_total{kind=\"ok\"} 0"), std::string::npos);
  EXPECT_NE(t.find("g4_queue_depth 3"), std::string::npos);
  EXPECT_NE(t.find("g4_kv_cache_usage_ratio 0.5"), std::string::npos);
}

}  // namespace
}  // namespace g4::server
