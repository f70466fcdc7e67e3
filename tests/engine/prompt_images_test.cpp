// Placeholder expansion against the fixture prompts: the template's one <|image|> per image,
// expanded with each image's soft-token count, gives the fixture's token ids and spans.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "engine/prompt_images.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(PromptImages, ExpansionGivesTheFixtureTokensAndSpans) {
  const auto dir = test::fixtures_dir() / "gemma4-vision-tiny" / "tiny-e-vision";
  if (!std::filesystem::exists(dir / "manifest.json")) GTEST_SKIP() << "no fixtures at " << dir;
  const auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  const ImageTokenIds ids{m["token_ids"]["image_token_id"], m["token_ids"]["boi_token_id"], m["token_ids"]["eoi_token_id"]};
  for (const char* seq : {"two_images", "one_image"}) {
    const auto& s = m["sequences"][seq];
    const std::vector<int> expected = test::read_i32(dir / "expected" / s["tokens"]["file"].get<std::string>());
    // The template's form: each run <|image> <|image|> x S <image|> is one <|image|>.
    std::vector<int> compact;
    std::vector<int> counts;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] == ids.begin) continue;
      if (expected[i] == ids.end) continue;
      if (expected[i] == ids.image) {
        if (i == 0 || expected[i - 1] != ids.image) {
          compact.push_back(ids.image);
          counts.push_back(0);
        }
        ++counts.back();
        continue;
      }
      compact.push_back(expected[i]);
    }
    std::vector<int> prompt = compact;
    const auto spans = expand_image_placeholders(prompt, ids, counts);
    EXPECT_EQ(prompt, expected) << seq;
    ASSERT_EQ(spans.size(), s["image_token_positions"].size()) << seq;
    for (size_t k = 0; k < spans.size(); ++k) {
      EXPECT_EQ(spans[k].first, s["image_token_positions"][k][0].get<int64_t>()) << seq;
      EXPECT_EQ(spans[k].count, s["image_token_positions"][k][1].get<int64_t>()) << seq;
    }
    const auto found = find_image_spans(expected, ids);
    ASSERT_EQ(found.size(), spans.size());
    for (size_t k = 0; k < spans.size(); ++k) EXPECT_EQ(found[k].first, spans[k].first);
  }
}

TEST(PromptImages, MismatchedCountsAndBareRunsAreRefused) {
  const ImageTokenIds ids{501, 500, 502};
  std::vector<int> prompt = {2, 501, 7, 501};
  try {
    expand_image_placeholders(prompt, ids, {3});
    FAIL() << "accepted 2 placeholders for 1 image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 image placeholder token(s) (id 501) but 1 image(s)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(prompt, (std::vector<int>{2, 501, 7, 501}));  // untouched on refusal
  EXPECT_THROW(find_image_spans({2, 501, 501, 502}, ids), Error);
  EXPECT_THROW(find_image_spans({2, 500, 501, 501}, ids), Error);
}

}  // namespace
}  // namespace g4
