// The token ids that end generation, resolved from the checkpoint's own files.
// Gemma 4 stops on <eos>, <turn|> (end of turn) and <|tool_response> (the model hands control
// back after a tool call), plus whatever the configs list (config.json / generation_config.json
// eos_token_id, tokenizer_config eos_token / eot_token). Every name is looked up in the
// vocabulary; one that is missing or lands on <unk> is reported in `problems`, never used:
// a stop set containing <unk> would end generation on any unknown character.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "text/vocab.h"

namespace g4::text {

struct StopTokens {
  std::vector<int32_t> ids;           // sorted, unique
  std::vector<std::string> problems;  // one sentence per name or id that could not be used
  bool contains(int32_t id) const;
};

// config_eos_ids: eos_token_id values from config.json / generation_config.json (may be empty).
StopTokens resolve_stop_tokens(const Vocabulary& vocab, std::span<const int32_t> config_eos_ids = {});

// eos_token_id (an int or a list) from DIR/generation_config.json and DIR/config.json (top level
// or text_config), merged. Missing files give nothing; malformed ones throw g4::Error.
std::vector<int32_t> read_config_eos_ids(const std::filesystem::path& model_dir);

}  // namespace g4::text
