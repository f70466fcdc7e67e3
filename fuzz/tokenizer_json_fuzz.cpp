// libFuzzer target: tokenizer.json (+ tokenizer_config.json) -> VocabularySpec -> Vocabulary ->
// Tokenizer, then encode/decode of a fixed text.
// Input: tokenizer.json bytes, optionally followed by "\n@@\n" and tokenizer_config.json bytes.
// Asserts: refusals are g4::Error with a message (from the parser, the config merge and the
// vocabulary build); an accepted vocabulary gives a tokenizer whose ids are all in range.
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "text/tokenizer.h"
#include "text/tokenizer_json.h"

using namespace g4;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find("\n@@\n");
  try {
    text::VocabularySpec spec = text::parse_tokenizer_json(in.substr(0, cut), "fuzz/tokenizer.json");
    if (cut != std::string_view::npos)
      text::apply_tokenizer_config(in.substr(cut + 4), "fuzz/tokenizer_config.json", spec);
    text::Tokenizer tok{text::Vocabulary(std::move(spec))};
    const auto ids = tok.encode("Hello, world! <bos><|turn>user\n \xe2\x96\x81\xff\xc3\xa9 12 \n\n  x", {true, true});
    for (int32_t id : ids) G4_FUZZ_CHECK(tok.vocab().valid_id(id));
    (void)tok.decode(ids);
    (void)tok.decode(ids, {true});
    for (int32_t id = 0; id < tok.vocab().size() && id < 64; ++id) (void)tok.token_text(id);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
