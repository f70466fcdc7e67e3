// The reference forward pass against the shared golden fixtures (made by llama.cpp with exact
// GELU, cross-checked against an independent float64 numpy transcription of transformers).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "model/forward_reference.h"
#include "model/model.h"
#include "test_util.h"

namespace g4 {
namespace {

struct FixtureSequence {
  std::string name;
  std::vector<int> tokens;
  int64_t row_offset;
};

std::vector<FixtureSequence> fixture_sequences(const std::filesystem::path& dir, int64_t* vocab) {
  auto j = nlohmann::json::parse(test::read_file(dir / "expected.json"));
  *vocab = j["vocab_size"].get<int64_t>();
  std::vector<FixtureSequence> out;
  for (const auto& s : j["sequences"])
    out.push_back({s["name"], s["tokens"].get<std::vector<int>>(), s["row_offset"].get<int64_t>()});
  return out;
}

class FixtureLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureLogits, ReferenceMatchesExpectedLogits) {
  const auto dir = test::fixtures_dir() / "gemma4-tiny" / GetParam();
  auto model = load_model(dir / "hf");
  int64_t V = 0;
  const auto seqs = fixture_sequences(dir, &V);
  const auto expected = test::read_f32(dir / "expected_logits.f32");
  ASSERT_EQ(V, model->config.vocab_size);
  float worst = 0;
  for (const auto& s : seqs) {
    const auto logits = forward_reference(*model, s.tokens);
    ASSERT_EQ(logits.size(), s.tokens.size() * size_t(V));
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      const float* got = &logits[t * size_t(V)];
      const float* want = &expected[(size_t(s.row_offset) + t) * size_t(V)];
      for (int64_t i = 0; i < V; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      const auto got_arg = std::max_element(got, got + V) - got;
      const auto want_arg = std::max_element(want, want + V) - want;
      EXPECT_EQ(got_arg, want_arg) << s.name << " position " << t;
    }
  }
  // The two independent references agree to ~2e-5; 1e-3 is the bound.
  EXPECT_LE(worst, 1e-3f);
  RecordProperty("max_abs_delta", std::to_string(worst));
  std::printf("[ fixture ] %s max |delta| = %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, FixtureLogits, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

}  // namespace
}  // namespace g4
