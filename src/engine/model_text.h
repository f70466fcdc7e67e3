// The text side that belongs to a loaded model: its tokenizer (an explicit tokenizer.json, the
// one beside the checkpoint, or a GGUF's tokenizer.ggml.* metadata) and its stop tokens (config
// eos ids plus Gemma 4's stop names, resolved in the vocabulary). Shared by the CLI and server.
#pragma once
#include <filesystem>
#include <optional>

#include "model/model.h"
#include "text/stop_tokens.h"
#include "text/tokenizer.h"

namespace g4 {

// nullopt when the model carries no tokenizer and none was given. Throws g4::Error for a
// tokenizer that is malformed or larger than the model's vocabulary.
std::optional<text::Tokenizer> load_model_tokenizer(const Model& m,
                                                    const std::optional<std::filesystem::path>& tokenizer_file);

// eos ids from config.json / generation_config.json beside a checkpoint directory, else the
// config's own eos_token_ids (GGUF metadata).
std::vector<int32_t> model_eos_ids(const Model& m);

// Stop ids for generation; without a vocabulary, just model_eos_ids().
text::StopTokens model_stop_tokens(const Model& m, const text::Vocabulary* vocab);

}  // namespace g4
