#include "server/token_text_stream.h"

#include <array>

namespace g4::server {

bool is_output_syntax_token(std::string_view piece) {
  static constexpr std::array<std::string_view, 12> kSyntax = {
      "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>", "<|tool_response>",
      "<tool_response|>", "<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|think|>"};
  for (auto s : kSyntax)
    if (piece == s) return true;
  return false;
}

bool token_is_shown(const text::Tokenizer& t, int id) {
  if (!t.vocab().valid_id(id)) return false;
  if (!t.is_special(id)) return true;
  return is_output_syntax_token(t.vocab().piece(id));
}

}  // namespace g4::server
