// libFuzzer target: the chat template's input (OpenAI-style messages and tools, as JSON).
// Input: a JSON array (the messages) or an object {"messages", "tools", "thinking", "preserve",
// "empty_thought", "gen"} (the last four booleans select ChatOptions).
// Asserts: render_chat and encode_chat refuse with g4::Error and a message (a JSON type error
// escaping is a finding); an encoded prompt has its ids in range and exactly one bos, at 0.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

#include "text/chat_template.h"
#include "text_fixture.h"

using namespace g4;
using nlohmann::json;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::synth_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  json messages = j, tools = nullptr;
  const text::Tokenizer& tok = fuzz::synth_tokenizer();
  text::ChatOptions opt = text::chat_options_for(tok.vocab());
  if (j.is_object()) {
    messages = j.contains("messages") ? j["messages"] : json(nullptr);
    if (j.contains("tools")) tools = j["tools"];
    auto flag = [&](const char* k, bool& out) {
      if (j.contains(k) && j[k].is_boolean()) out = j[k].get<bool>();
    };
    flag("thinking", opt.enable_thinking);
    flag("preserve", opt.preserve_thinking);
    flag("empty_thought", opt.empty_thought_when_not_thinking);
    flag("gen", opt.add_generation_prompt);
  }
  try {
    const std::string text = text::render_chat(messages, tools, opt);
    G4_FUZZ_CHECK(text.rfind(opt.bos_token, 0) == 0);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  try {
    const auto ids = text::encode_chat(tok, messages, tools, opt);
    G4_FUZZ_CHECK(!ids.empty());
    const int32_t bos = *tok.bos_id();
    G4_FUZZ_CHECK(ids[0] == bos);
    for (size_t i = 0; i < ids.size(); ++i) {
      G4_FUZZ_CHECK(tok.vocab().valid_id(ids[i]));
      if (i > 0) G4_FUZZ_CHECK(ids[i] != bos);
    }
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
