#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>

#include "gemma3_tokenizer.h"
#include "platform/error.h"
#include "text/tokenizer_json.h"

namespace g4::text {
namespace {

using testing::gemma3;
using testing::gemma3_cases;

TEST(Gemma3Tokenizer, LoadsTheFixtureVocabulary) {
  const Vocabulary& v = gemma3().vocab();
  EXPECT_EQ(v.size(), 262145);  // 262,144 + <image_soft_token>
  EXPECT_EQ(v.merge_count(), 514906u);
  EXPECT_EQ(v.byte_id(0x00), 238);
  EXPECT_EQ(v.byte_id(0xFF), 493);
  EXPECT_EQ(v.find("\xE2\x96\x81"), 236743);
  EXPECT_EQ(v.unk_id(), 3);
  EXPECT_EQ(gemma3().bos_id(), 2);
  EXPECT_EQ(v.type(2), TokenType::Control);
  EXPECT_EQ(v.type(107), TokenType::UserDefined);
  EXPECT_EQ(v.type(3), TokenType::Unknown);
  EXPECT_EQ(v.named_piece("eos_token"), "<end_of_turn>");  // Gemma 3's config
  EXPECT_TRUE(v.add_bos());
}

TEST(Gemma3Tokenizer, AllSharedCasesMatchTheReference) {
  const auto cases = gemma3_cases();
  ASSERT_EQ(cases.size(), 209u);
  int failures = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    const auto got = gemma3().encode(text, {.add_bos = c["add_bos"].get<bool>()});
    EXPECT_EQ(got, want) << c["id"] << " " << c["category"] << " " << c["text"].dump();
    EXPECT_EQ(gemma3().decode(want), c["decoded"].get<std::string>()) << c["id"];
    failures += got != want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Gemma3Tokenizer, RoundTripsTextWithoutLiteralMetaspace) {
  for (const auto& c : gemma3_cases()) {
    const std::string text = c["text"];
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // U+2581 decodes as a space
    EXPECT_EQ(gemma3().decode(gemma3().encode(text)), text) << c["id"];
  }
  const std::string mixed = "  fn main() {\n\tprintln!(\"héllo 世界 🎉\");\n}\r\n\n\n   end ";
  EXPECT_EQ(gemma3().decode(gemma3().encode(mixed)), mixed);
}

TEST(Gemma3Tokenizer, InvalidUtf8GoesThroughByteFallback) {
  const std::string bad = std::string("ok") + char(0xFF) + char(0xC3) + " " + char(0xE4) + char(0xBD) + "x" +
                          char(0xED) + char(0xA0) + char(0x80) + char(0x80);
  const auto ids = gemma3().encode(bad);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[1], 238 + 0xFF);
  EXPECT_EQ(ids[2], 238 + 0xC3);
  for (int32_t id : ids) EXPECT_NE(id, 3) << "no <unk> with byte fallback";
  // Broken runs decode to one U+FFFD per byte, as the reference's ByteFallback does.
  const std::string dec = gemma3().decode(ids);
  EXPECT_EQ(dec.substr(0, 2), "ok");
  EXPECT_NE(dec.find("\xEF\xBF\xBD\xEF\xBF\xBD"), std::string::npos);
}

TEST(Gemma3Tokenizer, LongRunsAreNotQuadratic) {
  // Correctness on very long runs only; speed is a benchmark figure (bench/tokenizer_bench.cpp,
  // one 100,000-char word), never a timed unit test on a shared machine. Quadratic merging
  // would make this test take minutes, which ctest's timeout would catch.
  const std::string run(200000, 'a');
  const auto ids = gemma3().encode(run);
  EXPECT_EQ(gemma3().decode(ids), run);
  const std::string spaces(100000, ' ');
  EXPECT_EQ(gemma3().decode(gemma3().encode(spaces)), spaces);
}

TEST(Gemma3Tokenizer, AddedTokensCanBeTreatedAsText) {
  const auto ids = gemma3().encode("<bos>hi", {.match_added_tokens = false});
  EXPECT_NE(ids.front(), 2);
  EXPECT_EQ(gemma3().decode(ids), "<bos>hi");
  EXPECT_EQ(gemma3().encode("<bos>hi").front(), 2);
}

TEST(Gemma3Tokenizer, DecodeSkipsSpecialTokensOnRequestAndIgnoresBadIds) {
  EXPECT_EQ(gemma3().decode(std::vector<int32_t>{2, 105, 9259, 106}, {.skip_special = true}), "Hello");
  EXPECT_EQ(gemma3().decode(std::vector<int32_t>{2, 9259}), "<bos>Hello");
  EXPECT_EQ(gemma3().decode(std::vector<int32_t>{-1, 9259, 99999999}), "Hello");
}

// A tiny hand-written tokenizer.json, to check the loader's errors and BPE rules in isolation.
std::string tiny_json(const std::string& model_extra = "", const std::string& merges = R"([["a","b"],["ab","c"]])") {
  std::string vocab = R"({"<unk>":0,"a":1,"b":2,"c":3,"ab":4,"abc":5,"▁":6)";
  for (int b = 0; b < 256; ++b) vocab += ",\"" + byte_piece(uint8_t(b)) + "\":" + std::to_string(7 + b);
  vocab += "}";
  return R"({"added_tokens":[{"id":0,"content":"<unk>","special":true}],
    "normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},
    "pre_tokenizer":null,"model":{"type":"BPE","unk_token":"<unk>","byte_fallback":true,"fuse_unk":true)" +
         model_extra + R"(,"vocab":)" + vocab + R"(,"merges":)" + merges + "}}";
}

TEST(TokenizerJson, TinyFileLoadsAndMerges) {
  Tokenizer t{Vocabulary(parse_tokenizer_json(tiny_json(), "tiny.json"))};
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(t.encode("ab c"), (std::vector<int32_t>{4, 6, 3}));
  EXPECT_EQ(t.encode("d"), (std::vector<int32_t>{7 + 'd'}));
  EXPECT_EQ(t.decode(t.encode("abc abd")), "abc abd");
}

TEST(TokenizerJson, LegacyStringMergesAreAccepted) {
  Tokenizer t{Vocabulary(parse_tokenizer_json(tiny_json("", R"(["a b","ab c"])"), "tiny.json"))};
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{5}));
}

void expect_error(const std::string& text, const std::string& needle) {
  try {
    Vocabulary v(parse_tokenizer_json(text, "bad.json"));
    ADD_FAILURE() << "no error; wanted one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerJson, MalformedFilesGiveClearErrors) {
  const std::string good = tiny_json();
  expect_error(good.substr(0, good.size() / 2), "invalid JSON at byte");
  expect_error("", "invalid JSON");
  expect_error("[1,2]", "not a tokenizer.json");
  expect_error(R"({"model":{"type":"Unigram","vocab":[]}})", "Unigram");
  expect_error(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", "model.type");
  expect_error(R"({"version":"1.0"})", "no \"model\"");
  expect_error(tiny_json("", R"([["a","zz"]])"), "merge 0");
  expect_error(tiny_json("", R"([["a","b","c"]])"), "3 parts");
  expect_error(tiny_json("", R"(["ab"])"), "not \"left right\"");
  std::string dup = good;
  dup.replace(dup.find("\"c\":3"), 5, "\"c\":2");
  expect_error(dup, "given to both");
  std::string gap = good;
  gap.replace(gap.find("\"c\":3"), 5, "\"c\":999");
  expect_error(gap, "missing from model.vocab");
  std::string neg = good;
  neg.replace(neg.find("\"c\":3"), 5, "\"c\":-3");
  expect_error(neg, "model.vocab[\"c\"]");
  std::string norm = good;
  norm.replace(norm.find("\"Replace\""), 9, "\"NFKC\"");
  expect_error(norm, "normalizer");
}

TEST(TokenizerJson, MissingAndTruncatedFilesOnDisk) {
  g4::test::TempDir dir;
  EXPECT_THROW(Tokenizer::from_dir(dir.path()), Error);
  const std::string full = g4::test::read_file(testing::gemma3_dir() / "tokenizer.json");
  g4::test::write_file(dir / "tokenizer.json", full.substr(0, 5'000'000));
  try {
    Tokenizer::from_dir(dir.path());
    ADD_FAILURE() << "truncated file loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer.json"), std::string::npos) << what;
    EXPECT_NE(what.find("model.vocab"), std::string::npos) << what;  // says where it broke
  }
}

}  // namespace
}  // namespace g4::text
