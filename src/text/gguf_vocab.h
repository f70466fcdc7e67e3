// Fills a VocabularySpec from a GGUF file's tokenizer.ggml.* metadata (llama.cpp's `gemma4`
// BPE vocabulary), so a GGUF checkpoint tokenizes with the same code as tokenizer.json.
// The GGUF reader (model layer) passes the arrays it read; this maps them:
//   tokenizer.ggml.tokens       -> pieces            tokenizer.ggml.token_type -> types (same values)
//   tokenizer.ggml.scores       -> scores            tokenizer.ggml.merges     -> merges ("left right")
//   tokenizer.ggml.*_token_id   -> named_tokens      tokenizer.ggml.add_bos_token -> add_bos
// Control and user-defined tokens are the ones matched in raw text (HF's added tokens).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "text/vocab.h"

namespace g4::text {

struct GgufTokenizerArrays {
  std::string source;                     // the .gguf path, for errors
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;       // GGUF values 1..6; empty = all normal
  std::vector<float> scores;              // may be empty
  std::vector<std::string> merges;        // "left right"
  std::map<std::string, int64_t> special_ids;  // "bos_token" -> tokenizer.ggml.bos_token_id, "eos_token", ...
  bool add_bos = true;
};

// Throws g4::Error naming the key and index of anything malformed.
VocabularySpec vocabulary_spec_from_gguf(GgufTokenizerArrays arrays);

}  // namespace g4::text
