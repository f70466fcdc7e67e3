// Requests with n choices: the prompt is prefilled once and copied, and choice i must be exactly
// what a request of n = 1 with seed + i gives on its own (the independent truth: the same prompt
// alone, through the ordinary path).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>

#include "engine/engine.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace choices_test {

struct Choice {
  std::vector<int> tokens;
  std::vector<float> logprobs;
  int finished = 0;
  GenerationEvent final_event;
};

// Events routed by choice; every choice must finish exactly once.
EventCallback by_choice(std::map<int, Choice>& out) {
  return [&out](const GenerationEvent& e) {
    Choice& c = out[e.choice];
    for (const auto& t : e.tokens) {
      c.tokens.push_back(t.token);
      c.logprobs.push_back(t.logprob);
    }
    if (e.finished) {
      ++c.finished;
      c.final_event = e;
    }
  };
}

std::unique_ptr<Model> fixture_model(const std::string& v) {
  return load_model(test::fixtures_dir() / "gemma4-tiny" / v / "hf");
}

std::vector<int> fixture_prompt(const std::string& v) {
  auto exp = nlohmann::json::parse(test::read_file(test::fixtures_dir() / "gemma4-tiny" / v / "expected.json"));
  return exp["sequences"][1]["tokens"].get<std::vector<int>>();
}

SamplingParams sampled(uint64_t seed, int max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.logprobs = true;
  return p;
}

class ChoicesFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChoicesFixture, EachChoiceEqualsItsSeedAloneAndThePromptIsPrefilledOnce) {
  auto m = fixture_model(GetParam());
  const std::vector<int> prompt = fixture_prompt(GetParam());
  constexpr int kChoices = 3, kTokens = 12;
  EngineOptions o;
  o.max_seqs = 4;
  o.prefill_chunk = 5;  // the prompt spans several steps before the fork
  o.kv.block_tokens = 4;
  std::map<int, Choice> together;
  {
    Engine eng(*m, o);
    GenerationRequest r{prompt, sampled(7, kTokens)};
    r.n = kChoices;
    eng.submit(r, by_choice(together));
    // Another request decodes beside the choices.
    std::map<int, Choice> other;
    eng.submit({{2, 9, 8, 7}, sampled(1, 20)}, by_choice(other));
    eng.run_until_idle();
    EXPECT_EQ(eng.prefilled_tokens(), int64_t(prompt.size()) + 4) << "the choices share one prefill";
    EXPECT_EQ(eng.kv_bytes_in_use(), 0u);
  }
  ASSERT_EQ(together.size(), size_t(kChoices));
  for (int i = 0; i < kChoices; ++i) {
    std::map<int, Choice> alone;
    Engine eng(*m, o);
    eng.submit({prompt, sampled(7 + uint64_t(i), kTokens)}, by_choice(alone));
    eng.run_until_idle();
    const Choice& c = together[i];
    EXPECT_EQ(c.finished, 1) << "choice " << i;
    EXPECT_EQ(c.final_event.choice, i);
    EXPECT_EQ(c.final_event.prompt_tokens, int64_t(prompt.size()));
    EXPECT_EQ(c.tokens, alone[0].tokens) << GetParam() << " choice " << i;
    EXPECT_EQ(c.logprobs, alone[0].logprobs) << GetParam() << " choice " << i;  // bit-identical logits
  }
  EXPECT_NE(together[0].tokens, together[1].tokens);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ChoicesFixture, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

TEST(Choices, CancelAndRefusalEndEveryChoice) {
  auto m = fixture_model("tiny-e");
  EngineOptions o;
  o.max_seqs = 3;
  Engine eng(*m, o);
  auto noop = [](const GenerationEvent&) {};
  GenerationRequest too_many{{2, 5, 6}, sampled(1, 4)};
  too_many.n = 4;
  try {
    eng.submit(too_many, noop);
    ADD_FAILURE() << "n above max_seqs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n = 4"), std::string::npos) << e.what();
  }
  too_many.n = 0;
  EXPECT_THROW(eng.submit(too_many, noop), Error);

  // Cancelled while waiting (the first request holds all slots), and while prefilling.
  std::map<int, Choice> first, waiting, prefilling;
  GenerationRequest r{{2, 5, 6, 7, 8}, sampled(1, 30)};
  r.n = 3;
  eng.submit(r, by_choice(first));
  const int waiting_id = eng.submit(r, by_choice(waiting));
  eng.step();
  eng.cancel(waiting_id);
  eng.run_until_idle();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i].finished, 1);
    EXPECT_EQ(first[i].final_event.finish_reason, "length");
    EXPECT_EQ(waiting[i].finished, 1) << "choice " << i;
    EXPECT_EQ(waiting[i].final_event.finish_reason, "cancelled");
  }
  EngineOptions slow = o;
  slow.prefill_chunk = 1;
  Engine eng2(*m, slow);
  const int id = eng2.submit(r, by_choice(prefilling));
  eng2.step();
  eng2.cancel(id);
  eng2.run_until_idle();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(prefilling[i].finished, 1) << "choice " << i;
    EXPECT_EQ(prefilling[i].final_event.finish_reason, "cancelled");
    EXPECT_TRUE(prefilling[i].tokens.empty());
  }
  EXPECT_EQ(eng2.kv_bytes_in_use(), 0u);
}

// A cache that holds the prompt once but not three times refuses the request up front.
TEST(Choices, CacheTooSmallForTheCopiesIsAnErrorOnEveryChoice) {
  auto m = fixture_model("tiny-31b");
  EngineOptions o;
  o.max_seqs = 4;
  o.kv.block_tokens = 8;
  o.kv.max_total_tokens = 32;
  Engine eng(*m, o);
  std::map<int, Choice> out;
  GenerationRequest r{std::vector<int>(20, 5), sampled(1, 4)};
  r.n = 3;
  eng.submit(r, by_choice(out));
  eng.run_until_idle();
  ASSERT_EQ(out.size(), 3u);
  for (auto& [i, c] : out) {
    EXPECT_EQ(c.finished, 1);
    EXPECT_EQ(c.final_event.finish_reason, "error");
    EXPECT_NE(c.final_event.error.find("3 times"), std::string::npos) << c.final_event.error;
  }
}

}  // namespace choices_test
}  // namespace g4
