// libFuzzer target: Tokenizer::encode on arbitrary bytes (g4's synthetic Gemma 4 vocabulary,
// 2048 ids: added tokens, BPE merges, byte fallback), then decode.
// Asserts: encode never throws and every id is inside the vocabulary; without added-token
// matching no control token is produced; decode(encode(x)) == x for valid UTF-8 x (with U+2581,
// which the normalizer makes of a space, read back as a space); for invalid UTF-8 the decoded
// text is valid UTF-8.
#include <cstdint>
#include <string>
#include <string_view>

#include "text/utf8.h"
#include "text_fixture.h"

using namespace g4;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::synth_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const text::Tokenizer& tok = fuzz::synth_tokenizer();
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const auto ids = tok.encode(in);
  for (int32_t id : ids) G4_FUZZ_CHECK(tok.vocab().valid_id(id));
  G4_FUZZ_CHECK(in.empty() == ids.empty());
  const std::string back = tok.decode(ids);
  if (text::utf8_valid(in)) {
    std::string expected(in);
    for (size_t p = 0; (p = expected.find("\xe2\x96\x81", p)) != std::string::npos;) expected.replace(p, 3, " ");
    G4_FUZZ_CHECK(back == expected);
  } else {
    G4_FUZZ_CHECK(text::utf8_valid(back));
  }

  text::EncodeOptions plain;
  plain.match_added_tokens = false;
  plain.add_bos = true;
  const auto ids2 = tok.encode(in, plain);
  G4_FUZZ_CHECK(!ids2.empty());
  for (size_t i = 0; i < ids2.size(); ++i) {
    G4_FUZZ_CHECK(tok.vocab().valid_id(ids2[i]));
    if (i > 0) G4_FUZZ_CHECK(tok.vocab().type(ids2[i]) != text::TokenType::Control);
  }
  return 0;
}
