// forward_cached's optional output of final-normed hidden rows (what a drafter reads): the same
// rows the head multiplies, and no change to any logit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/dense_kv_store.h"
#include "model/forward_cached.h"
#include "test_util.h"

namespace g4 {
namespace {

// The hidden rows forward_cached hands out are the fixture's final-normed rows (an independent
// float64 reference), and asking for them changes no bit of the logits.
TEST(CachedHiddenRows, AreTheNormedRowsAndLeaveTheLogitsAlone) {
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-31b-assistant";
  auto target = load_model(dir / "target");
  const auto manifest = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  const auto all = manifest["tokens"].get<std::vector<int>>();
  const std::vector<int> tokens(all.begin(), all.begin() + 8);
  std::vector<float> plain, with, hidden;
  for (std::vector<float>* out : {&plain, &with}) {
    DenseKvStore kv(target->config);
    const int seq = kv.add_sequence();
    std::vector<BatchRow> rows;
    for (size_t t = 0; t < tokens.size(); ++t) rows.push_back({seq, int64_t(t), tokens[t], t % 3 == 2});
    forward_cached(*target, rows, kv, {}, *out, out == &with ? &hidden : nullptr);
  }
  EXPECT_EQ(plain, with);
  const size_t H = size_t(target->config.hidden_size);
  ASSERT_EQ(hidden.size(), 2 * H);  // rows 2 and 5
  const auto want = test::read_f32(dir / "target_hidden.f32");  // [T, H]
  EXPECT_LE(test::max_abs_diff(&hidden[0], &want[2 * H], H), 1e-3f);
  EXPECT_LE(test::max_abs_diff(&hidden[H], &want[5 * H], H), 1e-3f);
}

}  // namespace
}  // namespace g4
