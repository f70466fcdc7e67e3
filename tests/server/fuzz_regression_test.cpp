// Inputs found by fuzz/openai_request_fuzz (scripts/fuzz.sh), kept as regression tests.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/openai_request.h"

namespace g4::server {
namespace {

// {"max_tokens": 1e9999}: nlohmann throws out_of_range.406 (not a parse_error) for a number it
// cannot hold; it escaped parse_json_object and the server answered 500 internal_error.
TEST(ServerFuzzRegression, NumberOverflowInBodyIs400) {
  for (const char* body : {R"({"model": "x", "messages": [], "max_tokens": 1e9999})", R"({"a": -1e400})",
                           R"([333333333333333333333333e3333])"}) {
    auto r = parse_json_object(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    const ApiError& e = std::get<ApiError>(r);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.code, "invalid_json") << body;
    EXPECT_NE(e.message.find("malformed JSON"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace g4::server
