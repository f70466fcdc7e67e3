#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "platform/error.h"

namespace g4 {
namespace {

// Test data from mt19937_64's raw output (fully specified by the standard, unlike distributions).
std::vector<float> random_logits(int vocab, uint64_t seed, float scale = 4.0f) {
  std::mt19937_64 gen(seed);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (auto& x : logits) x = scale * (float(double(gen() >> 11) * 0x1.0p-53) * 2.0f - 1.0f);
  return logits;
}

// Independent softmax in double of logits / temperature.
std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += (p[i] = std::exp((logits[i] - max) / temperature));
  for (auto& x : p) x /= sum;
  return p;
}

int argmax(const std::vector<float>& logits) {
  return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

SamplingParams params_with(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<int> draw_many(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.sample(logits.data(), {}, {}).token);
  return out;
}

// Pearson chi-square of observed counts against expected probabilities (tokens with p = 0 must
// never be drawn).
double chi_square(const std::vector<int>& draws, const std::vector<double>& expected) {
  std::vector<double> counts(expected.size(), 0);
  for (int t : draws) counts[size_t(t)] += 1;
  double chi2 = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    double e = expected[i] * double(draws.size());
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

TEST(SequenceRng, MatchesReferenceXoshiro256StarStar) {
  // Values from an independent Python implementation of splitmix64 seeding + xoshiro256**.
  SequenceRng zero(0);
  EXPECT_EQ(zero.next_u64(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(zero.next_u64(), 0xbf6e1f784956452aull);
  EXPECT_EQ(zero.next_u64(), 0x1a5f849d4933e6e0ull);
  SequenceRng answer(42);
  EXPECT_EQ(answer.next_u64(), 0x15780b2e0c2ec716ull);
  EXPECT_EQ(answer.next_u64(), 0x6104d9866d113a7eull);
  double u = SequenceRng(7).next_unit();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(Sampler, GreedyIsArgmax) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto logits = random_logits(1000, seed);
    Sampler sampler(params_with(0.0f), 1000);
    EXPECT_EQ(sampler.sample(logits.data(), {}, {}).token, argmax(logits));
  }
}

TEST(Sampler, GreedyTiesPickLowestIdAndSkipsNan) {
  std::vector<float> logits = {1.0f, std::nanf(""), 3.0f, 3.0f, 2.0f};
  Sampler sampler(params_with(0.0f), 5);
  EXPECT_EQ(sampler.sample(logits.data(), {}, {}).token, 2);
}

TEST(Sampler, GreedyOnFullGemmaVocabulary) {
  const int vocab = 262144;
  auto logits = random_logits(vocab, 3);
  logits[123456] = 50.0f;
  Sampler sampler(params_with(0.0f), vocab);
  EXPECT_EQ(sampler.sample(logits.data(), {}, {}).token, 123456);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  auto logits = random_logits(500, 11, 2.0f);
  Sampler a(params_with(1.0f, 1234), 500), b(params_with(1.0f, 1234), 500), c(params_with(1.0f, 999), 500);
  auto seq_a = draw_many(a, logits, 100);
  auto seq_b = draw_many(b, logits, 100);
  auto seq_c = draw_many(c, logits, 100);
  EXPECT_EQ(seq_a, seq_b);
  EXPECT_NE(seq_a, seq_c);
}

TEST(Sampler, SeededSequenceIndependentOfBatchNeighbours) {
  const int vocab = 300;
  SamplingParams p = params_with(0.9f, 77);
  p.top_p = 0.95f;
  p.top_k = 100;

  Sampler alone(p, vocab);
  std::vector<int> alone_tokens;
  for (int step = 0; step < 60; ++step) {
    auto logits = random_logits(vocab, 1000 + uint64_t(step));
    alone_tokens.push_back(alone.sample(logits.data(), {}, alone_tokens).token);
  }

  // Same sequence inside a "batch": neighbours with other seeds and settings sample in between,
  // some before and some after it in each step.
  Sampler in_batch(p, vocab), neighbour1(params_with(1.3f, 5), vocab), neighbour2(params_with(0.0f), vocab);
  SamplingParams p3 = params_with(0.7f, 77);  // same seed, different settings
  p3.min_p = 0.1f;
  Sampler neighbour3(p3, vocab);
  std::vector<int> batch_tokens;
  for (int step = 0; step < 60; ++step) {
    auto logits = random_logits(vocab, 1000 + uint64_t(step));
    auto other = random_logits(vocab, 5000 + uint64_t(step));
    neighbour1.sample(other.data(), {}, {});
    if (step % 2) neighbour3.sample(other.data(), {}, {});
    batch_tokens.push_back(in_batch.sample(logits.data(), {}, batch_tokens).token);
    neighbour2.sample(other.data(), {}, {});
  }
  EXPECT_EQ(alone_tokens, batch_tokens);
}

TEST(Sampler, TinyTemperatureIsGreedy) {
  for (float t : {1e-4f, 1e-30f}) {
    auto logits = random_logits(1000, 21);
    logits[10] = *std::max_element(logits.begin(), logits.end()) + 0.05f;
    Sampler sampler(params_with(t, 3), 1000);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(sampler.sample(logits.data(), {}, {}).token, 10) << "T=" << t;
  }
}

TEST(Sampler, TopK1AndTinyTopPAreGreedy) {
  SamplingParams k1 = params_with(1.5f, 8);
  k1.top_k = 1;
  SamplingParams p_tiny = params_with(1.5f, 8);
  p_tiny.top_p = 1e-6f;
  Sampler by_k(k1, 2000), by_p(p_tiny, 2000);
  for (uint64_t row = 0; row < 50; ++row) {
    auto logits = random_logits(2000, row, 1.0f);  // flat-ish: random sampling would rarely hit argmax
    EXPECT_EQ(by_k.sample(logits.data(), {}, {}).token, argmax(logits));
    EXPECT_EQ(by_p.sample(logits.data(), {}, {}).token, argmax(logits));
  }
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f, 1.2f, 0.8f};
  const int n = 40000;
  // Chi-square critical value at p = 0.001: 24.32 for 7 degrees of freedom. The seed is fixed,
  // so this is deterministic; a wrong distribution (e.g. temperature ignored) gives hundreds.
  const double kCritical7 = 24.32;
  for (float temperature : {1.0f, 0.7f, 1.8f}) {
    Sampler sampler(params_with(temperature, 2024), 8);
    auto draws = draw_many(sampler, logits, n);
    EXPECT_LT(chi_square(draws, softmax(logits, temperature)), kCritical7) << "T=" << temperature;
  }
  // The same with temperature ignored must fail clearly: the test can tell distributions apart.
  Sampler hot(params_with(1.8f, 2024), 8);
  EXPECT_GT(chi_square(draw_many(hot, logits, n), softmax(logits, 1.0)), 10 * kCritical7);
}

TEST(Sampler, TruncatedDistributionsMatchRenormalisedSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f, 1.2f, 0.8f};
  const auto full = softmax(logits);  // sorted ids by p: 3, 6, 0, 7, 1, 4, 2, 5
  const auto renormalise = [&](std::vector<int> keep) {
    std::vector<double> p(full.size(), 0.0);
    double sum = 0;
    for (int t : keep) sum += full[size_t(t)];
    for (int t : keep) p[size_t(t)] = full[size_t(t)] / sum;
    return p;
  };
  // Critical values at p = 0.001 for (support - 1) degrees of freedom.
  {
    SamplingParams p = params_with(1.0f, 5);
    p.top_k = 3;
    Sampler sampler(p, 8);
    EXPECT_LT(chi_square(draw_many(sampler, logits, 30000), renormalise({3, 6, 0})), 13.82);
  }
  {
    // Cumulative p in order: 3 -> .369, 6 -> .571, 0 -> .737, 7 -> .847: top_p 0.8 keeps 4 ids.
    double cum = full[3] + full[6] + full[0];
    ASSERT_LT(cum, 0.8);
    ASSERT_GT(cum + full[7], 0.8);
    SamplingParams p = params_with(1.0f, 6);
    p.top_p = 0.8f;
    Sampler sampler(p, 8);
    EXPECT_LT(chi_square(draw_many(sampler, logits, 30000), renormalise({3, 6, 0, 7})), 16.27);
  }
  {
    // min_p 0.3: keep p >= 0.3 * p(3), i.e. logit >= 2 + ln 0.3 = 0.796: ids 3, 6, 0, 7.
    SamplingParams p = params_with(1.0f, 7);
    p.min_p = 0.3f;
    Sampler sampler(p, 8);
    EXPECT_LT(chi_square(draw_many(sampler, logits, 30000), renormalise({3, 6, 0, 7})), 16.27);
  }
  {
    // All three: top_k 5 {3,6,0,7,1}; top_p 0.7 measured within them; min_p removes nothing more.
    SamplingParams p = params_with(1.0f, 8);
    p.top_k = 5;
    p.top_p = 0.7f;
    p.min_p = 0.05f;
    Sampler sampler(p, 8);
    double in_k = full[3] + full[6] + full[0] + full[7] + full[1];
    ASSERT_LT((full[3] + full[6]) / in_k, 0.7);
    ASSERT_GE((full[3] + full[6] + full[0]) / in_k, 0.7);
    EXPECT_LT(chi_square(draw_many(sampler, logits, 30000), renormalise({3, 6, 0})), 13.82);
  }
}

TEST(Sampler, MinPOneKeepsOnlyTheMostLikely) {
  SamplingParams p = params_with(1.0f, 9);
  p.min_p = 1.0f;
  Sampler sampler(p, 100);
  auto logits = random_logits(100, 4, 0.5f);
  for (int t : draw_many(sampler, logits, 100)) EXPECT_EQ(t, argmax(logits));
}

TEST(Sampler, LargeVocabularyTruncationStaysInsideTheSet) {
  const int vocab = 262144;
  auto logits = random_logits(vocab, 31, 8.0f);
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  auto probs = softmax(logits);

  SamplingParams k = params_with(1.0f, 1);
  k.top_k = 40;
  Sampler top_k(k, vocab);
  std::vector<int> top40(order.begin(), order.begin() + 40);
  for (int t : draw_many(top_k, logits, 20)) EXPECT_NE(std::find(top40.begin(), top40.end(), t), top40.end());

  SamplingParams p = params_with(1.0f, 2);
  p.top_p = 0.5f;
  Sampler top_p(p, vocab);
  size_t nucleus = 0;
  for (double cum = 0; cum < 0.5; ++nucleus) cum += probs[size_t(order[nucleus])];
  ASSERT_GT(nucleus, 64u);  // more than the first round of the incremental sort
  std::vector<int> allowed(order.begin(), order.begin() + long(nucleus));
  std::sort(allowed.begin(), allowed.end());
  for (int t : draw_many(top_p, logits, 20)) EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), t)) << t;
}

TEST(Sampler, ProcessLogitsAppliesBiasAndPenaltiesByTheRightAmounts) {
  SamplingParams p = params_with(1.0f);
  p.logit_bias = {{0, 1.5f}, {3, -2.0f}};
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler sampler(p, 10);
  std::vector<float> logits = {1, 2, 3, 4, -1, -2, 6, 7, 8, 9};
  const std::vector<int> prompt = {1, 4, 4, 9};
  const std::vector<int> generated = {5, 5, 5, 8, 1};
  sampler.process_logits(logits.data(), prompt, generated);

  std::vector<float> expected = {1 + 1.5f, 2, 3, 4 - 2.0f, -1, -2, 6, 7, 8, 9};
  // Repetition (distinct ids of prompt + output, once each): positive / 2, negative * 2.
  expected[1] /= 2;   // in prompt and output: still once
  expected[4] *= 2;   // twice in prompt: once
  expected[9] /= 2;
  expected[5] *= 2;
  expected[8] /= 2;
  // Presence / frequency: output only.
  expected[5] -= 3 * 0.25f + 0.5f;
  expected[8] -= 1 * 0.25f + 0.5f;
  expected[1] -= 1 * 0.25f + 0.5f;
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << "token " << i;
}

TEST(Sampler, RepetitionWindowCountsOnlyTheLastTokens) {
  SamplingParams p = params_with(1.0f);
  p.repetition_penalty = 4.0f;
  p.repetition_window = 3;  // last 3 of prompt + output: ids 3, 4 (prompt) and 5 (output)
  Sampler sampler(p, 8);
  std::vector<float> logits(8, 8.0f);
  const std::vector<int> prompt = {1, 2, 3, 4};
  const std::vector<int> generated = {5};
  sampler.process_logits(logits.data(), prompt, generated);
  const std::vector<float> expected = {8, 8, 8, 2, 2, 2, 8, 8};
  EXPECT_EQ(logits, expected);

  // Window larger than the output: reaches back into the prompt only as far as it says.
  p.repetition_window = 1;
  Sampler last_only(p, 8);
  std::vector<float> logits2(8, 8.0f);
  last_only.process_logits(logits2.data(), prompt, generated);
  EXPECT_EQ(logits2, (std::vector<float>{8, 8, 8, 8, 8, 2, 8, 8}));
}

TEST(Sampler, RepetitionPenaltyFlipsGreedyChoice) {
  SamplingParams p = params_with(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler sampler(p, 3);
  std::vector<float> logits = {4.0f, 2.5f, 0.0f};
  const std::vector<int> seen = {0};
  EXPECT_EQ(sampler.sample(logits.data(), {}, {}).token, 0);
  EXPECT_EQ(sampler.sample(logits.data(), seen, {}).token, 1);  // 4 / 2 < 2.5
  EXPECT_EQ(sampler.sample(logits.data(), {}, seen).token, 1);
}

TEST(Sampler, LogitBiasMinus100BansAndPlus100Forces) {
  auto logits = random_logits(50, 12, 3.0f);
  const int best = argmax(logits);
  SamplingParams ban = params_with(1.0f, 4);
  ban.logit_bias = {{best, -100.0f}};
  Sampler banned(ban, 50);
  for (int t : draw_many(banned, logits, 5000)) ASSERT_NE(t, best);
  ban.temperature = 0;
  Sampler banned_greedy(ban, 50);
  EXPECT_NE(banned_greedy.sample(logits.data(), {}, {}).token, best);

  SamplingParams force = params_with(1.0f, 4);
  force.logit_bias = {{17, 100.0f}};
  Sampler forced(force, 50);
  for (int t : draw_many(forced, logits, 1000)) ASSERT_EQ(t, 17);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  const int vocab = 20;
  auto logits = random_logits(vocab, 13, 3.0f);
  SamplingParams p = params_with(0.6f, 5);
  p.logprobs = true;
  p.top_logprobs = 20;
  p.logit_bias = {{0, 5.0f}};  // changes the choice, not the reported logprobs
  p.top_k = 4;
  Sampler sampler(p, vocab);
  auto reference = softmax(logits);
  for (int i = 0; i < 20; ++i) {
    SampleResult r = sampler.sample(logits.data(), {}, {});
    EXPECT_NEAR(r.logprob, std::log(reference[size_t(r.token)]), 1e-5);
    ASSERT_EQ(r.top_logprobs.size(), 20u);
    double sum = 0;
    for (size_t j = 0; j < r.top_logprobs.size(); ++j) {
      sum += std::exp(double(r.top_logprobs[j].logprob));
      EXPECT_NEAR(r.top_logprobs[j].logprob, std::log(reference[size_t(r.top_logprobs[j].token)]), 1e-5);
      if (j > 0) {
        EXPECT_GE(r.top_logprobs[j - 1].logprob, r.top_logprobs[j].logprob);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);  // all 20 tokens: the distribution sums to one
    EXPECT_EQ(r.top_logprobs[0].token, argmax(logits));
  }
}

TEST(Sampler, TopLogprobsOnLargeVocabularySumBelowOne) {
  const int vocab = 262144;
  auto logits = random_logits(vocab, 14, 10.0f);
  SamplingParams p = params_with(0.0f);
  p.logprobs = true;
  p.top_logprobs = 5;
  Sampler sampler(p, vocab);
  SampleResult r = sampler.sample(logits.data(), {}, {});
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  EXPECT_EQ(r.top_logprobs[0].token, r.token);
  EXPECT_FLOAT_EQ(r.top_logprobs[0].logprob, r.logprob);
  double sum = 0;
  for (const auto& alt : r.top_logprobs) sum += std::exp(double(alt.logprob));
  EXPECT_GT(sum, 0.0);
  EXPECT_LT(sum, 1.0);
}

TEST(Sampler, NoLogprobsUnlessAsked) {
  auto logits = random_logits(30, 15);
  Sampler sampler(params_with(1.0f), 30);
  SampleResult r = sampler.sample(logits.data(), {}, {});
  EXPECT_TRUE(r.top_logprobs.empty());
  EXPECT_EQ(r.logprob, 0.0f);
}

TEST(Sampler, NanAndInfiniteLogitsNeverChosenAndNeverThrow) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {std::nanf(""), -inf, 0.5f, std::nanf(""), 0.4f};
  SamplingParams p = params_with(1.0f, 3);
  p.top_p = 0.9f;
  Sampler sampler(p, 5);
  for (int t : draw_many(sampler, logits, 500)) EXPECT_TRUE(t == 2 || t == 4) << t;
  std::vector<float> impossible(5, -inf);
  EXPECT_NO_THROW(sampler.sample(impossible.data(), {}, {}));
}

void expect_invalid(const SamplingParams& p, int vocab, const std::string& field, const std::string& value) {
  try {
    p.validate(vocab);
    ADD_FAILURE() << "expected g4::Error naming " << field;
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(field), std::string::npos) << what;
    EXPECT_NE(what.find(value), std::string::npos) << what;
  }
}

TEST(SamplingParams, ValidationNamesTheFieldAndValue) {
  SamplingParams ok;
  EXPECT_NO_THROW(ok.validate(100));

  SamplingParams p;
  p.temperature = -0.5f;
  expect_invalid(p, 100, "temperature", "-0.5");
  p = {};
  p.temperature = std::numeric_limits<float>::infinity();
  expect_invalid(p, 100, "temperature", "inf");
  p = {};
  p.top_p = 0.0f;
  expect_invalid(p, 100, "top_p", "0");
  p = {};
  p.top_p = 1.5f;
  expect_invalid(p, 100, "top_p", "1.5");
  p = {};
  p.top_k = -1;
  expect_invalid(p, 100, "top_k", "-1");
  p = {};
  p.min_p = 2.0f;
  expect_invalid(p, 100, "min_p", "2");
  p = {};
  p.repetition_penalty = 0.0f;
  expect_invalid(p, 100, "repetition_penalty", "0");
  p = {};
  p.repetition_window = -3;
  expect_invalid(p, 100, "repetition_window", "-3");
  p = {};
  p.presence_penalty = 3.0f;
  expect_invalid(p, 100, "presence_penalty", "3");
  p = {};
  p.frequency_penalty = -2.5f;
  expect_invalid(p, 100, "frequency_penalty", "-2.5");
  p = {};
  p.logit_bias = {{100, 1.0f}};
  expect_invalid(p, 100, "logit_bias", "100");
  p = {};
  p.logit_bias = {{-1, 1.0f}};
  expect_invalid(p, 100, "logit_bias", "-1");
  p = {};
  p.logit_bias = {{5, 150.0f}};
  expect_invalid(p, 100, "logit_bias", "150");
  p = {};
  p.max_tokens = 0;
  expect_invalid(p, 100, "max_tokens", "0");
  p = {};
  p.stop_token_ids = {7, 100};
  expect_invalid(p, 100, "stop_token_ids", "100");
  p = {};
  p.stop_strings = {"ok", ""};
  expect_invalid(p, 100, "stop_strings[1]", "\"\"");
  p = {};
  p.logprobs = true;
  p.top_logprobs = 21;
  expect_invalid(p, 100, "top_logprobs", "21");
  p = {};
  p.top_logprobs = 3;
  expect_invalid(p, 100, "top_logprobs", "logprobs");
  expect_invalid(ok, 0, "vocab_size", "0");

  SamplingParams bad;
  bad.top_p = 0;
  EXPECT_THROW(Sampler(bad, 100), Error);
}

}  // namespace
}  // namespace g4
