// Reads a Hugging Face tokenizer.json (+ tokenizer_config.json) into a VocabularySpec.
// Only the shape Gemma ships is accepted: model BPE with byte fallback, normalizer
// Replace(" " -> U+2581) or none, a pre-tokenizer that is a no-op after that normalizer.
// Anything else is refused with an error naming the field, rather than tokenized differently.
// The 33 MB Gemma file is read with nlohmann's SAX interface straight from a memory map:
// building a DOM for 262k vocab entries and 515k merge pairs costs ~4x more.
#pragma once
#include <filesystem>

#include "text/vocab.h"

namespace g4::text {

// tokenizer_config, when given and present, adds add_bos_token and the named tokens
// (bos_token, eos_token, eot_token, ...). Throws g4::Error naming the file and field.
VocabularySpec read_tokenizer_json(const std::filesystem::path& tokenizer_json,
                                   const std::filesystem::path& tokenizer_config = {});

// Same, from bytes already in memory (`source` names them in errors).
VocabularySpec parse_tokenizer_json(std::string_view json_text, const std::string& source);
// Merges tokenizer_config.json's fields into spec (add_bos_token, *_token names).
void apply_tokenizer_config(std::string_view json_text, const std::string& source, VocabularySpec& spec);

}  // namespace g4::text
