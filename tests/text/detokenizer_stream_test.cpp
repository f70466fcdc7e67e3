#include "text/detokenizer_stream.h"

#include <gtest/gtest.h>

#include "gemma3_tokenizer.h"
#include "text/utf8.h"

namespace g4::text {
namespace {

using testing::gemma3;

std::string stream_all(const std::vector<int32_t>& ids, std::vector<std::string>* chunks = nullptr,
                       DecodeOptions opts = {}) {
  StreamingDetokenizer s(gemma3(), opts);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = s.push(id);
    EXPECT_TRUE(utf8_valid(piece)) << "chunk breaks a character";
    if (chunks) chunks->push_back(piece);
    all += piece;
  }
  std::string tail = s.finish();
  EXPECT_TRUE(utf8_valid(tail));
  EXPECT_EQ(s.pending_bytes(), 0u);
  return all + tail;
}

TEST(StreamingDetokenizer, MultiByteCharactersSplitAcrossByteTokens) {
  // U+20000 (CJK ext-B) has no piece: four byte tokens.
  const std::string text = "a\xF0\xA0\x80\x80 b";
  const auto ids = gemma3().encode(text);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream_all(ids, &chunks), text);
  // No chunk holds part of the 4-byte character: it arrives whole.
  bool whole = false;
  for (const auto& c : chunks) whole = whole || c.find("\xF0\xA0\x80\x80") != std::string::npos;
  EXPECT_TRUE(whole);
}

TEST(StreamingDetokenizer, EqualsDecodeOnEveryFixtureCase) {
  for (const auto& c : testing::gemma3_cases()) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(stream_all(ids), gemma3().decode(ids)) << c["id"];
    EXPECT_EQ(stream_all(ids, nullptr, {.skip_special = true}), gemma3().decode(ids, {.skip_special = true})) << c["id"];
  }
}

TEST(StreamingDetokenizer, BrokenByteRunsBecomeReplacementCharsLikeDecode) {
  // <0xE4><0xBD> then a normal token: an incomplete character, then one that is cut by the end.
  const std::vector<int32_t> ids = {238 + 0xE4, 238 + 0xBD, 9259, 238 + 0xF0, 238 + 0x9F};
  EXPECT_EQ(stream_all(ids), gemma3().decode(ids));
  EXPECT_EQ(gemma3().decode(ids), "\xEF\xBF\xBD\xEF\xBF\xBDHello\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StreamingDetokenizer, EmojiAndCjkFromRealPiecesStreamImmediately) {
  const std::string text = "日本語のテキスト 👨‍👩‍👧 ok";
  const auto ids = gemma3().encode(text);
  StreamingDetokenizer s(gemma3());
  std::string all;
  for (int32_t id : ids) all += s.push(id);
  all += s.finish();
  EXPECT_EQ(all, text);
}

TEST(StreamingDetokenizer, RandomIdsNeverBreakUtf8) {
  std::mt19937 rng(7);
  std::vector<int32_t> ids;
  for (int i = 0; i < 3000; ++i) ids.push_back(rng() % 3 == 0 ? int32_t(238 + rng() % 256) : int32_t(rng() % 262145));
  EXPECT_EQ(stream_all(ids), gemma3().decode(ids));
}

}  // namespace
}  // namespace g4::text
