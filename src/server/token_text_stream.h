// The engine's TokenTextStream over the streaming detokenizer, for server responses: control
// tokens the output parser needs (<|channel>, <|tool_call>, <|"|>, ...) are kept; other special
// tokens (<bos>, <pad>, <unk>, <mask>, unused slots) are dropped before the detokenizer sees them,
// so the text a client gets equals Tokenizer::decode of the kept ids exactly.
#pragma once
#include <memory>
#include <string>

#include "engine/engine.h"
#include "text/detokenizer_stream.h"
#include "text/tokenizer.h"

namespace g4::server {

// True when a special token is part of Gemma 4's output syntax (kept in the text).
bool is_output_syntax_token(std::string_view piece);
// True when the server's text stream shows this token.
bool token_is_shown(const text::Tokenizer& tokenizer, int id);

class ServerTextStream : public TokenTextStream {
 public:
  explicit ServerTextStream(const text::Tokenizer& t) : tok_(t), detok_(t) {}
  std::string push(int token) override { return token_is_shown(tok_, token) ? detok_.push(token) : std::string(); }
  std::string flush() override { return detok_.finish(); }

 private:
  const text::Tokenizer& tok_;
  text::StreamingDetokenizer detok_;
};

inline TextStreamFactory server_text_streams(const text::Tokenizer& t) {
  return [&t] { return std::make_unique<ServerTextStream>(t); };
}

}  // namespace g4::server
