// base64 decoding against RFC 4648's test vectors, and refusals that name the offset.
#include <gtest/gtest.h>

#include "platform/base64.h"
#include "platform/error.h"

namespace g4 {
namespace {

TEST(Base64, DecodesTheRfcVectorsWithAndWithoutPadding) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"Zg==", "f"},       {"Zm8=", "fo"},
                                                         {"Zm9v", "foo"},  {"Zm9vYg==", "foob"}, {"Zm9vYmE=", "fooba"},
                                                         {"Zm9vYmFy", "foobar"}};
  for (const auto& [in, out] : vectors) {
    EXPECT_EQ(base64_decode(in), out) << in;
    std::string bare(in);
    while (!bare.empty() && bare.back() == '=') bare.pop_back();
    EXPECT_EQ(base64_decode(bare), out) << bare;
  }
  EXPECT_EQ(base64_decode("/+8A"), std::string("\xff\xef\x00", 3));
}

std::string error_of(const std::string& text) {
  try {
    base64_decode(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Base64, RefusesBadInputNamingTheOffset) {
  EXPECT_NE(error_of("Zm9v!mFy").find("'!' at offset 4"), std::string::npos) << error_of("Zm9v!mFy");
  EXPECT_NE(error_of("Zm9v YmFy").find("' ' at offset 4"), std::string::npos);
  EXPECT_NE(error_of("Zm=vYmFy").find("offset 2"), std::string::npos) << error_of("Zm=vYmFy");
  EXPECT_NE(error_of("Zm9vY").find("not a valid length"), std::string::npos);
  EXPECT_NE(error_of("Zm9v=").find("padding"), std::string::npos) << error_of("Zm9v=");
  EXPECT_NE(error_of(std::string("Zm9v\x80", 5)).find("byte 128 at offset 4"), std::string::npos);
}

}  // namespace
}  // namespace g4
