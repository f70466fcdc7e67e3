// --model (and quantize's IN): a path on disk, or a Hugging Face repo id ("org/name[:rev|:QUANT]")
// resolved from the local hub cache by platform/hf_cache.h. A path that exists always wins.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "platform/hf_cache.h"

namespace g4::cli {

struct ModelArg {
  std::filesystem::path path;       // what the loaders open
  std::optional<HfResolved> cache;  // set when the argument was a repo id
};

// Resolves the argument and, for a repo id, prints "[g4] model org/name -> PATH (revision,
// commit, cache root)" on stderr, so every command says which files it loaded.
ModelArg model_arg(const std::string& arg);

// The paragraph every command's help ends with, kept in one place.
inline constexpr const char* kModelHelp =
    "\n\nMODEL is a Hugging Face checkpoint directory (config.json + safetensors), a .gguf file, or a\n"
    "repo id org/name[:REV|:QUANT] found in the local Hugging Face cache: $HF_HUB_CACHE, else\n"
    "$HF_HOME/hub, else ~/.cache/huggingface/hub (g4 reads the cache; it downloads nothing). REV is\n"
    "a name under refs/ or a 40-hex commit (default main); any other suffix is a quant tag that picks\n"
    "the .gguf file whose name holds it (org/name:Q4_K_M; mmproj files are skipped). A path that\n"
    "exists always wins over a repo id.";

}  // namespace g4::cli
