#include "text/gguf_vocab.h"

#include <gtest/gtest.h>

#include "gemma3_tokenizer.h"
#include "platform/error.h"
#include "text/tokenizer.h"

namespace g4::text {
namespace {

// The Gemma 3 fixture's pieces and types re-expressed as GGUF arrays.
TEST(GgufVocabulary, SameTokensAsTokenizerJson) {
  const Vocabulary& v = testing::gemma3().vocab();
  GgufTokenizerArrays a;
  a.source = "fixture.gguf";
  for (int32_t id = 0; id < v.size(); ++id) {
    a.tokens.emplace_back(v.piece(id));
    a.token_types.push_back(int32_t(v.type(id)));
  }
  GgufTokenizerArrays small = a;
  small.special_ids = {{"bos_token", 2}, {"eos_token", 1}};
  // Without merges every character is its own token, but all pieces and types carry over.
  Tokenizer t{Vocabulary(vocabulary_spec_from_gguf(small))};
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(t.vocab().type(105), TokenType::Control);
  EXPECT_EQ(t.encode("<start_of_turn>ab"), (std::vector<int32_t>{105, testing::gemma3().vocab().find("a"),
                                                                  testing::gemma3().vocab().find("b")}));
  small.merges = {"a b"};
  Tokenizer merged{Vocabulary(vocabulary_spec_from_gguf(small))};
  EXPECT_EQ(merged.encode("ab"), (std::vector<int32_t>{testing::gemma3().vocab().find("ab")}));
}

TEST(GgufVocabulary, MalformedArraysAreReported) {
  GgufTokenizerArrays a;
  a.source = "bad.gguf";
  a.tokens = {"<unk>", "a"};
  a.token_types = {2};
  EXPECT_THROW(vocabulary_spec_from_gguf(a), Error);
  a.token_types = {2, 9};
  EXPECT_THROW(vocabulary_spec_from_gguf(a), Error);
  a.token_types = {2, 1};
  a.merges = {"ab"};
  EXPECT_THROW(vocabulary_spec_from_gguf(a), Error);
  a.merges = {};
  a.special_ids = {{"bos_token", 7}};
  EXPECT_THROW(vocabulary_spec_from_gguf(a), Error);
}

}  // namespace
}  // namespace g4::text
