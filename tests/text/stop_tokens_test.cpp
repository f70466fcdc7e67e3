#include "text/stop_tokens.h"

#include <gtest/gtest.h>

#include "gemma3_tokenizer.h"
#include "platform/error.h"
#include "text/synth_tokenizer.h"

namespace g4::text {
namespace {

TEST(StopTokens, Gemma4NamesResolveInASynthTokenizer) {
  g4::test::TempDir dir;
  write_synth_tokenizer(dir.path(), 1024);
  const Tokenizer t = Tokenizer::from_dir(dir.path());
  const StopTokens stop = resolve_stop_tokens(t.vocab());
  EXPECT_EQ(stop.ids, (std::vector<int32_t>{1, 50, 106}));
  EXPECT_TRUE(stop.problems.empty());
  EXPECT_TRUE(stop.contains(106));
  EXPECT_FALSE(stop.contains(3));
}

TEST(StopTokens, Gemma3FilesReportTheMissingGemma4Names) {
  const StopTokens stop = resolve_stop_tokens(testing::gemma3().vocab());
  // <eos> and tokenizer_config's eos_token <end_of_turn> resolve; <turn|>, <|tool_response> do not.
  EXPECT_EQ(stop.ids, (std::vector<int32_t>{1, 106}));
  ASSERT_EQ(stop.problems.size(), 2u);
  EXPECT_NE(stop.problems[0].find("<turn|>"), std::string::npos);
  EXPECT_NE(stop.problems[1].find("<|tool_response>"), std::string::npos);
}

TEST(StopTokens, UnknownTokenIsNeverAStop) {
  const std::vector<int32_t> config = {1, 3, 106, 999999999};
  const StopTokens stop = resolve_stop_tokens(testing::gemma3().vocab(), config);
  EXPECT_FALSE(stop.contains(3));
  EXPECT_FALSE(stop.contains(999999999));
  EXPECT_EQ(stop.problems.size(), 4u);
  std::string why;
  EXPECT_FALSE(testing::gemma3().vocab().special_id("<unk>", &why));
  EXPECT_NE(why.find("unknown token"), std::string::npos);
}

TEST(StopTokens, ReadsEosIdsFromConfigs) {
  g4::test::TempDir dir;
  g4::test::write_file(dir / "config.json", R"({"text_config":{"eos_token_id":[1,106]}})");
  g4::test::write_file(dir / "generation_config.json", R"({"eos_token_id":[1,106,50]})");
  EXPECT_EQ(read_config_eos_ids(dir.path()), (std::vector<int32_t>{1, 106, 50, 1, 106}));
  g4::test::write_file(dir / "config.json", R"({"eos_token_id":"x"})");
  EXPECT_THROW(read_config_eos_ids(dir.path()), Error);
}

}  // namespace
}  // namespace g4::text
