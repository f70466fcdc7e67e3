// Gemma 4's chat template (Google's E2B/E4B chat_template.jinja, as described in spec section 6),
// written out in C++ instead of interpreted from Jinja:
//   <bos>[<|turn>system\n[<|think|>\n][system text][<|tool>declaration:NAME{...}<tool|>...]<turn|>\n]
//   <|turn>user\n{text}<turn|>\n  <|turn>model\n{text, earlier thinking stripped}<turn|>\n ...
//   [<|turn>model\n]   (the generation prompt; not after a tool call or tool response)
// Messages are OpenAI-style: role system|developer|user|assistant|tool, content a string, a list
// of parts (text, image/image_url, audio/input_audio, video) or null; assistant tool_calls and
// reasoning/reasoning_content; tool messages with tool_call_id / name.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace g4::text {

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = false;    // writes <|think|> at the top of the system turn
  bool preserve_thinking = false;  // keep reasoning of earlier tool-calling turns
  // The 26B/31B template variant: with thinking off, the generation prompt is followed by an
  // empty thought block <|channel>thought\n<channel|>. E2B/E4B do not do this.
  bool empty_thought_when_not_thinking = false;
  std::string bos_token = "<bos>";  // from the tokenizer (chat_options_for() fills it)
};

// bos_token taken from the vocabulary's tokenizer_config (throws g4::Error if the files name none).
ChatOptions chat_options_for(const Vocabulary& vocab);

// The prompt text. messages: JSON array; tools: JSON array of {"type":"function","function":{...}}
// (or null). Throws g4::Error on malformed messages (naming the message index and field).
std::string render_chat(const nlohmann::json& messages, const nlohmann::json& tools, const ChatOptions& options);

// The control tokens the template writes that the vocabulary lacks as added tokens (each would be
// tokenized as plain characters). Empty for a Gemma 4 tokenizer; Gemma 3's lacks <|turn> etc.
std::vector<std::string> missing_template_tokens(const Vocabulary& vocab);

// Renders and encodes. The result has exactly one bos, at position 0; a bos anywhere else (say,
// "<bos>" typed inside a message) is refused with g4::Error, as is a vocabulary missing the
// template's tokens.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const nlohmann::json& messages,
                                 const nlohmann::json& tools, ChatOptions options);

}  // namespace g4::text
