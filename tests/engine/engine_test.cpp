// The engine (continuous batching + sampling + stops + guard) against the fixtures' greedy
// continuations, and each request's output alone vs inside a batch.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>

#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

// Text for tests: token 7 -> "[7]". Independent of any tokenizer.
class BracketText : public TokenTextStream {
 public:
  std::string push(int t) override { return "[" + std::to_string(t) + "]"; }
  std::string flush() override { return ""; }
};
TextStreamFactory bracket_text() {
  return [] { return std::make_unique<BracketText>(); };
}

struct Collected {
  std::vector<int> tokens;
  std::string text;
  GenerationEvent final_event;
  bool finished = false;
};

EventCallback collect(Collected& c) {
  return [&c](const GenerationEvent& e) {
    for (const auto& t : e.tokens) c.tokens.push_back(t.token);
    c.text += e.text;
    if (e.finished) {
      c.finished = true;
      c.final_event = e;
    }
  };
}

std::unique_ptr<Model> fixture_model(const std::string& v) {
  return load_model(test::fixtures_dir() / "gemma4-tiny" / v / "hf");
}
nlohmann::json fixture_expected(const std::string& v) {
  return nlohmann::json::parse(test::read_file(test::fixtures_dir() / "gemma4-tiny" / v / "expected.json"));
}

SamplingParams greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

class EngineFixture : public ::testing::TestWithParam<std::string> {};

// All three fixture prompts at once through a 2-slot engine with 3-token prefill chunks: requests
// wait, join, prefill in chunks and leave while others decode, and each reproduces the greedy
// continuation llama.cpp and the numpy reference agree on.
TEST_P(EngineFixture, BatchedGreedyReproducesFixtureContinuations) {
  auto m = fixture_model(GetParam());
  auto exp = fixture_expected(GetParam());
  EngineOptions o;
  o.max_seqs = 2;
  o.prefill_chunk = 3;
  o.max_batch_tokens = 5;
  Engine eng(*m, o, bracket_text());
  std::vector<Collected> out(exp["sequences"].size());
  size_t i = 0;
  for (const auto& s : exp["sequences"]) {
    GenerationRequest r;
    r.prompt = s["tokens"].get<std::vector<int>>();
    r.sampling = greedy(exp["n_greedy"]);
    eng.submit(r, collect(out[i++]));
  }
  eng.run_until_idle();
  i = 0;
  for (const auto& s : exp["sequences"]) {
    const Collected& c = out[i++];
    ASSERT_TRUE(c.finished);
    EXPECT_EQ(c.final_event.finish_reason, "length");
    EXPECT_EQ(c.tokens, s["greedy_tokens_llamacpp"].get<std::vector<int>>()) << s["name"];
    EXPECT_EQ(c.final_event.generated_tokens, int64_t(c.tokens.size()));
    EXPECT_EQ(c.final_event.prompt_tokens, int64_t(s["n_tokens"]));
  }
  EXPECT_EQ(eng.kv_bytes_in_use(), 0u);
  EXPECT_EQ(eng.running(), 0);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, EngineFixture, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

// Same seed, same output: alone, and inside a batch of other requests with other seeds.
TEST(Engine, SeededSamplingIsIndependentOfTheBatch) {
  auto m = fixture_model("tiny-e");
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 40;
  p.seed = 1234;
  p.max_tokens = 24;
  const std::vector<int> prompt = {2, 10, 20, 30, 40};
  Collected alone;
  {
    Engine eng(*m, {}, bracket_text());
    eng.submit({prompt, p}, collect(alone));
    eng.run_until_idle();
  }
  Collected mixed[4];
  {
    Engine eng(*m, {}, bracket_text());
    for (int k = 0; k < 4; ++k) {
      SamplingParams q = p;
      if (k != 2) q.seed = 99 + uint64_t(k);
      GenerationRequest r{k == 2 ? prompt : std::vector<int>{2, 7, 8, 9, 10, 11, 12 + k}, q};
      eng.submit(r, collect(mixed[k]));
      eng.step();  // join at different steps
    }
    eng.run_until_idle();
  }
  EXPECT_EQ(alone.tokens.size(), 24u);
  EXPECT_EQ(alone.tokens, mixed[2].tokens);
  EXPECT_NE(mixed[0].tokens, mixed[1].tokens);
}

TEST(Engine, StopTokensStopStringsAndCancel) {
  auto m = fixture_model("tiny-e");
  auto exp = fixture_expected("tiny-e");
  const auto& seq = exp["sequences"][0];
  const auto prompt = seq["tokens"].get<std::vector<int>>();
  const auto want = seq["greedy_tokens_llamacpp"].get<std::vector<int>>();  // 493 140 167 449 ...
  Engine eng(*m, {}, bracket_text());
  Collected by_id, by_string, cancelled;
  SamplingParams a = greedy(20);
  a.stop_token_ids = {want[2]};
  eng.submit({prompt, a}, collect(by_id));
  SamplingParams b = greedy(20);
  b.stop_strings = {"][" + std::to_string(want[2]) + "]"};  // spans two tokens' text
  eng.submit({prompt, b}, collect(by_string));
  const int id = eng.submit({prompt, greedy(20)}, collect(cancelled));
  eng.step();
  eng.cancel(id);
  eng.run_until_idle();
  EXPECT_EQ(by_id.final_event.finish_reason, "stop");
  EXPECT_EQ(by_id.text, "[" + std::to_string(want[0]) + "][" + std::to_string(want[1]) + "]");  // stop token not shown
  EXPECT_EQ(by_string.final_event.finish_reason, "stop");
  EXPECT_EQ(by_string.text, "[" + std::to_string(want[0]) + "][" + std::to_string(want[1]));
  EXPECT_EQ(cancelled.final_event.finish_reason, "cancelled");
  EXPECT_LT(cancelled.tokens.size(), 20u);
}

TEST(Engine, RefusesBadRequests) {
  auto m = fixture_model("tiny-31b");
  EngineOptions o;
  o.max_context = 64;
  Engine eng(*m, o);
  auto noop = [](const GenerationEvent&) {};
  EXPECT_THROW(eng.submit({{}, greedy(4)}, noop), Error);
  EXPECT_THROW(eng.submit({{1, 2, 512}, greedy(4)}, noop), Error);
  EXPECT_THROW(eng.submit({std::vector<int>(64, 5), greedy(4)}, noop), Error);
  SamplingParams bad = greedy(4);
  bad.top_p = 2.0f;
  EXPECT_THROW(eng.submit({{1, 2}, bad}, noop), Error);
  // A request that would run past the context ends with "length" at the context edge.
  Collected c;
  eng.submit({std::vector<int>(60, 5), greedy(100)}, collect(c));
  eng.run_until_idle();
  EXPECT_EQ(c.final_event.finish_reason, "length");
  EXPECT_EQ(c.tokens.size(), 4u);
}

// Random-weight models fall into loops under greedy decoding: the guard names the loop, and the
// optional policy ends the sequence early once the loop is certain.
TEST(Engine, DegeneracyVerdictAndEarlyStop) {
  auto m = fixture_model("tiny-e");
  const std::vector<int> prompt = {49, 397, 336, 226, 223};
  Collected free_run, policed;
  {
    Engine eng(*m, {}, bracket_text());
    eng.submit({prompt, greedy(300)}, collect(free_run));
    GenerationRequest r{prompt, greedy(300)};
    r.stop_on_degenerate = true;
    eng.submit(r, collect(policed));
    eng.run_until_idle();
  }
  ASSERT_TRUE(free_run.final_event.verdict.degenerate()) << "this prompt loops under greedy decoding";
  EXPECT_EQ(free_run.tokens.size(), 300u);
  EXPECT_TRUE(policed.final_event.stopped_degenerate);
  EXPECT_LT(policed.tokens.size(), 300u);
  EXPECT_TRUE(policed.final_event.verdict.degenerate());
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// The SIMD kernels on a thread pool give the same greedy continuations and logits within f32
// rounding of the reference loops (fixture prompts; logits compared through logprobs).
TEST(Engine, FastKernelsMatchTheReferencePath) {
  for (const char* v : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    auto m = fixture_model(v);
    auto exp = fixture_expected(v);
    for (int threads : {1, 2}) {
      EngineOptions o;
      o.threads = threads;
      o.prefill_chunk = 7;
      Engine eng(*m, o);
      std::vector<Collected> out(exp["sequences"].size());
      size_t i = 0;
      for (const auto& s : exp["sequences"]) {
        SamplingParams p = greedy(exp["n_greedy"]);
        eng.submit({s["tokens"].get<std::vector<int>>(), p}, collect(out[i++]));
      }
      eng.run_until_idle();
      i = 0;
      for (const auto& s : exp["sequences"])
        EXPECT_EQ(out[i++].tokens, s["greedy_tokens_llamacpp"].get<std::vector<int>>()) << v << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// A detokenizer that holds token `held` (as a byte-fallback run would) until the next token or
// a flush. Whatever it holds must still reach the output when the sequence ends.
class HoldingText : public TokenTextStream {
 public:
  explicit HoldingText(int held) : held_(held) {}
  std::string push(int t) override {
    std::string out = std::move(pending_);
    pending_.clear();
    if (t == held_) pending_ = "<h>";
    else out += "[" + std::to_string(t) + "]";
    return out;
  }
  std::string flush() override { return std::exchange(pending_, std::string()); }

 private:
  int held_;
  std::string pending_;
};

TEST(Engine, HeldTextIsFlushedAtTheEnd) {
  auto m = fixture_model("tiny-e");
  auto exp = fixture_expected("tiny-e");
  const auto prompt = exp["sequences"][0]["tokens"].get<std::vector<int>>();
  const auto want = exp["sequences"][0]["greedy_tokens_llamacpp"].get<std::vector<int>>();  // 493 140 167 449
  const int held = want[2];
  Engine eng(*m, {}, [held] { return std::make_unique<HoldingText>(held); });
  Collected at_length, at_stop_token, at_stop_string;
  eng.submit({prompt, greedy(3)}, collect(at_length));  // ends on the held token
  SamplingParams p = greedy(10);
  p.stop_token_ids = {want[3]};
  eng.submit({prompt, p}, collect(at_stop_token));  // the stop token follows the held one
  SamplingParams q = greedy(10);
  q.stop_strings = {"0]<h"};  // spans the held text
  eng.submit({prompt, q}, collect(at_stop_string));
  eng.run_until_idle();
  const std::string head = "[" + std::to_string(want[0]) + "][" + std::to_string(want[1]) + "]";
  EXPECT_EQ(at_length.text, head + "<h>");
  EXPECT_EQ(at_length.final_event.finish_reason, "length");
  EXPECT_EQ(at_stop_token.text, head + "<h>");
  EXPECT_EQ(at_stop_token.final_event.finish_reason, "stop");
  EXPECT_EQ(at_stop_string.text, "[" + std::to_string(want[0]) + "][14");
  EXPECT_EQ(at_stop_string.final_event.finish_reason, "stop");
}

}  // namespace
}  // namespace g4
