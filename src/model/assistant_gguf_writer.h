// `g4 quantize` for a drafter: an AssistantModel written as llama.cpp's gemma4-assistant GGUF
// (the layout model/assistant_gguf.h reads), with its weight matrices in one type.
#pragma once
#include <filesystem>

#include "model/assistant.h"
#include "model/gguf_writer.h"

namespace g4 {

// Every matrix as `type` (rows that are not whole blocks fall back as write_model_gguf's do);
// norms and scalars F32; rope_freqs generated; the token ordering (when present) as I64 with the
// centroid head's top-k in gemma4-assistant.centroid_intermediate_top_k. Atomic (temp + rename).
GgufExportReport write_assistant_gguf(const AssistantModel& d, DType type, const std::filesystem::path& out);

}  // namespace g4
