#include "text/synth_tokenizer.h"

#include <gtest/gtest.h>

#include "platform/error.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace g4::text {
namespace {

TEST(SynthTokenizer, GemmaLayoutRoundTripsThroughTheLoader) {
  g4::test::TempDir dir;
  write_synth_tokenizer(dir.path(), 4096);
  const Tokenizer t = Tokenizer::from_dir(dir.path());
  const Vocabulary& v = t.vocab();
  EXPECT_EQ(v.size(), 4096);
  const std::pair<int, const char*> expected[] = {
      {0, "<pad>"}, {1, "<eos>"}, {2, "<bos>"}, {3, "<unk>"}, {4, "<mask>"}, {46, "<|tool>"}, {47, "<tool|>"},
      {48, "<|tool_call>"}, {49, "<tool_call|>"}, {50, "<|tool_response>"}, {51, "<tool_response|>"},
      {52, "<|\"|>"}, {98, "<|think|>"}, {100, "<|channel>"}, {101, "<channel|>"}, {105, "<|turn>"},
      {106, "<turn|>"}, {107, "\n"}, {238, "<0x00>"}, {493, "<0xFF>"}};
  for (const auto& [id, piece] : expected) EXPECT_EQ(v.piece(id), piece) << id;
  EXPECT_EQ(v.type(105), TokenType::Control);
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(v.named_piece("eos_token"), "<eos>");
  EXPECT_EQ(v.named_piece("eot_token"), "<turn|>");
  EXPECT_GT(v.merge_count(), 100u);

  const std::string text = "The model reads the text and writes the answer.\n\nHello, world! 123 {x: 1}\tend";
  const auto ids = t.encode(text);
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 2) << "merges should make English shorter than characters";
  const auto chat = t.encode("<bos><|turn>user\nhi<turn|>\n");
  EXPECT_EQ(chat[0], 2);
  EXPECT_EQ(chat[1], 105);
  const std::string unicode = "héllo 世界 🎉";
  EXPECT_EQ(t.decode(t.encode(unicode)), unicode);
}

TEST(SynthTokenizer, SmallestAndFullSizes) {
  g4::test::TempDir dir;
  write_synth_tokenizer(dir / "small", 512);
  const Tokenizer small = Tokenizer::from_dir(dir / "small");
  EXPECT_EQ(small.vocab().size(), 512);
  const std::string text = "Quick zebra, JSON {\"a\": [1, 2]}~";
  EXPECT_EQ(small.decode(small.encode(text)), text);

  write_synth_tokenizer(dir / "full", 262144);
  const Tokenizer full = Tokenizer::from_dir(dir / "full");
  EXPECT_EQ(full.vocab().size(), 262144);
  EXPECT_EQ(full.vocab().piece(258882), "<image|>");
  EXPECT_LT(std::filesystem::file_size(dir / "full" / "tokenizer.json"), 8u << 20);
  EXPECT_EQ(full.decode(full.encode(text)), text);
  EXPECT_FALSE(std::filesystem::exists(dir / "full" / "tokenizer.json.tmp"));
}

TEST(SynthTokenizer, RefusesTooSmallVocabularies) {
  g4::test::TempDir dir;
  EXPECT_THROW(write_synth_tokenizer(dir.path(), 511), Error);
}

}  // namespace
}  // namespace g4::text
