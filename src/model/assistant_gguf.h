// A Gemma 4 drafter stored as llama.cpp's converter writes it (general.architecture
// "gemma4-assistant", Gemma4AssistantModel in its conversion/gemma.py): the config read from the
// metadata and the tensors re-keyed by their Hugging Face names, so load_assistant binds either
// format the same way. docs/speculative.md lists the names.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "model/assistant_config.h"
#include "model/gguf.h"

namespace g4 {

// gemma4-assistant.* keys: the decoder stack as config_from_gguf(g, "gemma4-assistant") reads it,
// backbone_hidden_size from embedding_length_out (required), nextn_predict_layers (when present)
// equal to block_count. The centroid head is used when masked_embd_centroids.weight is present
// (llama.cpp's converter drops it, so such files score the whole vocabulary); its top-k comes from
// centroid_intermediate_top_k when the file carries it, else the released drafters' 32 (noted in
// text.notes). Throws g4::Error naming the file and key or tensor.
AssistantConfig assistant_config_from_gguf(const GgufFile& g);

// The weight tensors under their safetensors names (model.embed_tokens.weight, pre_projection.weight,
// model.layers.i.*, masked_embedding.centroids.weight, ...). rope_freqs.weight is left out (the
// config checked it); an unknown tensor is refused naming it and its data offset.
std::map<std::string, TensorView> assistant_gguf_tensors_as_hf(const GgufFile& g);

// The inverse: a drafter tensor's GGUF name (nullopt for a name that is not a drafter weight).
std::optional<std::string> assistant_gguf_name(const std::string& st_name);

// The GGUF name of the token ordering (an I32 or I64 tensor in g.int_tensors()).
inline constexpr const char* kGgufTokenOrdering = "masked_embd_ordering";

}  // namespace g4
