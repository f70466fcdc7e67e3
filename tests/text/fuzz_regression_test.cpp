// Inputs found by the fuzz targets (fuzz/, scripts/fuzz.sh), kept as regression tests.
#include <gtest/gtest.h>

#include <string>

#include "platform/error.h"
#include "text/tokenizer_json.h"

namespace g4::text {
namespace {

// A number JSON cannot hold as a double made nlohmann throw out_of_range.406 (not a parse_error),
// which escaped apply_tokenizer_config as a non-g4 exception.
TEST(TextFuzzRegression, NumberOverflowInTokenizerConfigIsAG4Error) {
  VocabularySpec spec;
  try {
    apply_tokenizer_config(R"({"model_max_length": 1e9999})", "tokenizer_config.json", spec);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace g4::text
