// GGUF tensor names (llama.cpp `gemma4`) <-> Hugging Face names under `model.language_model.`,
// so bind_weights validates a GGUF exactly as it validates safetensors.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>


#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "platform/tensor_view.h"

namespace g4 {

// "blk.3.attn_q.weight" -> "model.language_model.layers.3.self_attn.q_proj.weight";
// "output.weight" -> "lm_head.weight". nullopt for names g4 does not know (rope_freqs.weight
// maps to nullopt too: it is checked by config_from_gguf, not bound).
std::optional<std::string> gguf_to_hf_name(const std::string& gguf_name);
// The inverse; nullopt for names with no GGUF counterpart.
std::optional<std::string> hf_to_gguf_name(const std::string& hf_name);

// The GGUF's views re-keyed by HF name (view.name is the HF name, so bind_weights' messages
// and bookkeeping work unchanged). Unknown tensor names are refused, naming the tensor.
std::map<std::string, TensorView> gguf_tensors_as_hf(const GgufFile& g);
// The same with another name map (`to_hf`: nullopt for a name `arch` does not have), as the
// drafter's loader uses. rope_freqs.weight is left out (config_from_gguf checks it), and so are
// the integer tensors named in `index_tables` (read apart, from g.int_tensors()); any other
// tensor, weight or integer, is refused naming it, its shape and where its data is.
std::map<std::string, TensorView> gguf_tensors_renamed(const GgufFile& g,
                                                       const std::function<std::optional<std::string>(const std::string&)>& to_hf,
                                                       const std::string& arch, const std::vector<std::string>& index_tables = {});

// bind_weights over a GGUF: errors mention the GGUF tensor name and its data offset beside the
// HF name, and say that shapes are shown in row-major [out, in] order (GGUF ne reversed).
ModelWeights bind_gguf_weights(const ModelConfig& c, const GgufFile& g, std::map<std::string, TensorView>& storage);

}  // namespace g4
