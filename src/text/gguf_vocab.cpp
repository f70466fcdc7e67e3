#include "text/gguf_vocab.h"

#include "platform/error.h"

namespace g4::text {

VocabularySpec vocabulary_spec_from_gguf(GgufTokenizerArrays a) {
  VocabularySpec spec;
  spec.source = a.source;
  const size_t n = a.tokens.size();
  if (!a.token_types.empty() && a.token_types.size() != n)
    throw Error(a.source + ": tokenizer.ggml.token_type has " + std::to_string(a.token_types.size()) +
                " entries for " + std::to_string(n) + " tokens");
  spec.types.assign(n, TokenType::Normal);
  for (size_t i = 0; i < a.token_types.size(); ++i) {
    const int32_t t = a.token_types[i];
    if (t < 1 || t > 6)
      throw Error(a.source + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(t) +
                  " is not a GGUF token type (1..6)");
    spec.types[i] = TokenType(t);
    if (spec.types[i] == TokenType::Control || spec.types[i] == TokenType::UserDefined)
      spec.added_token_ids.push_back(int32_t(i));
    if (spec.types[i] == TokenType::Unknown && spec.unk_piece.empty()) spec.unk_piece = a.tokens[i];
  }
  spec.scores = std::move(a.scores);
  spec.merges.reserve(a.merges.size(), a.merges.size() * 10);
  for (size_t r = 0; r < a.merges.size(); ++r) {
    const std::string& m = a.merges[r];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() || m.find(' ', sp + 1) != std::string::npos)
      throw Error(a.source + ": tokenizer.ggml.merges[" + std::to_string(r) + "] \"" + m + "\" is not \"left right\"");
    spec.merges.add(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1));
  }
  for (const auto& [role, id] : a.special_ids) {
    if (id < 0 || size_t(id) >= n)
      throw Error(a.source + ": tokenizer.ggml." + role + "_id = " + std::to_string(id) + " is outside the vocabulary");
    spec.named_tokens[role] = a.tokens[size_t(id)];
  }
  spec.pieces = std::move(a.tokens);
  spec.add_bos = a.add_bos;
  spec.byte_fallback = true;
  spec.fuse_unk = true;
  spec.space_to_metaspace = true;  // Gemma's BPE: add_space_prefix = false, spaces become U+2581
  return spec;
}

}  // namespace g4::text
