// Glue between the GGUF reader (model layer) and the tokenizer (text layer), which do not
// depend on each other: tokenizer.ggml.* metadata <-> text::VocabularySpec.
#pragma once
#include <optional>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

namespace g4 {

// The tokenizer a GGUF carries (tokenizer.ggml.tokens, token_type, scores, merges, the special
// ids, add_bos_token); nullopt when it has no tokenizer.ggml.tokens. Throws g4::Error naming
// the key when the arrays are malformed or tokenizer.ggml.model is not a Gemma BPE vocabulary.
std::optional<text::Tokenizer> tokenizer_from_gguf(const GgufFile& g);

// Writes spec as tokenizer.ggml.* metadata (model "gemma4", the arrays, special ids for the
// roles bos/eos/unk/pad/eot, add_bos_token, add_space_prefix false).
void add_tokenizer_metadata(GgufWriter& w, const text::VocabularySpec& spec);

}  // namespace g4
