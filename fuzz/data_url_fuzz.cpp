// libFuzzer target: data: URLs of image parts (server/image_parts.h parse_data_url) and the
// strict base64 decoder under it (platform/base64.h), each on the raw input.
// Asserts: a refusal is an ApiError with a 4xx status and a message naming the field, or a
// g4::Error with a message; nothing else escapes. What is accepted is consistent: a data URL
// declares an image/* type and holds bytes; base64 gives exactly 6 bits per character (padding
// aside), and only the alphabet's characters were read.
#include <cstdint>
#include <string_view>
#include <variant>

#include "fuzz_util.h"
#include "platform/base64.h"
#include "server/image_parts.h"

using namespace g4;
using namespace g4::server;

namespace {

bool in_alphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

void check_base64(std::string_view in) {
  std::string out;
  try {
    out = base64_decode(in);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
    return;
  }
  size_t n = in.size();
  while (n > 0 && in.size() - n < 2 && in[n - 1] == '=') --n;
  for (size_t i = 0; i < n; ++i) G4_FUZZ_CHECK(in_alphabet(in[i]));
  G4_FUZZ_CHECK(n % 4 != 1);
  G4_FUZZ_CHECK(out.size() == n * 6 / 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string where = "messages[0].content[0].image_url";
  auto r = parse_data_url(in, where);
  if (auto* e = std::get_if<ApiError>(&r)) {
    G4_FUZZ_CHECK(e->status >= 400 && e->status < 500);
    G4_FUZZ_CHECK(!e->message.empty());
    G4_FUZZ_CHECK(e->param.rfind(where, 0) == 0);
  } else {
    const DataUrl& d = std::get<DataUrl>(r);
    G4_FUZZ_CHECK(d.media_type.rfind("image/", 0) == 0);
    G4_FUZZ_CHECK(!d.bytes.empty());
    G4_FUZZ_CHECK(in.rfind("data:", 0) == 0);
  }
  check_base64(in);
  return 0;
}
