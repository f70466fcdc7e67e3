// GGUF metadata (architecture `gemma4`, as llama.cpp's converter writes it) -> ModelConfig,
// the same config the Hugging Face config.json path produces (docs: gemma4-architecture §5).
#pragma once
#include "model/config.h"
#include "model/gguf.h"

namespace g4 {

// Reads gemma4.* (and tokenizer.ggml.* special ids); facts the metadata does not carry are
// taken from the tensors: vocab size (token_embd rows), the per-layer-embedding vocabulary
// (per_layer_token_embd rows), attention_k_eq_v (full layers without attn_v), tied head
// (no output.weight). rope_freqs.weight, when present, must describe exactly the config's
// proportional RoPE (1.0 on the rotated pairs, >= 1e29 elsewhere); otherwise it is refused.
// Throws g4::Error naming the file, key (and its byte offset) or tensor.
ModelConfig config_from_gguf(const GgufFile& g);
// The same for another architecture's keys: "gemma4-assistant" reads a drafter's decoder stack
// (llama.cpp's Gemma4AssistantModel converter: the gemma4 keys under that prefix). Its layers own
// no K/V: the config declares no sharing (the caller marks the plans shared), K=V full layers
// are inferred from per-type KV head counts, and per-layer embeddings or MoE are refused.
ModelConfig config_from_gguf(const GgufFile& g, const std::string& arch);

}  // namespace g4
