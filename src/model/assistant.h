// A loaded Gemma 4 "assistant" drafter (the *-it-assistant checkpoints): its config, the
// decoder stack as a Model whose layers have only Q projections, and the tensors around that
// stack (the input and output projections, the centroid head's tables), checked at load against
// the target it drafts for. The draft step itself is model/assistant_step.h.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/assistant_config.h"
#include "model/model.h"

namespace g4 {

struct AssistantModel {
  std::filesystem::path path;
  AssistantConfig config;
  AssistantPairing pairing;  // the target layers whose K/V each layer type reads
  // The four decoder layers, the final norm and the drafter's embed_tokens [V, H_d] (used only as
  // the tied head, never as input). stack->config is config.text. With the centroid head,
  // stack->weights.lm_head is the centroid table (what a step streams), not embed_tokens.
  std::unique_ptr<Model> stack;
  const TensorView* pre_projection = nullptr;   // [H_d, 2·H_t]: input concat(E_t[tok]·√H_t, h)
  const TensorView* post_projection = nullptr;  // [H_t, H_d]: the next step's h
  const TensorView* centroids = nullptr;        // [C, H_d]; null without use_ordered_embeddings
  // token_ordering [V] as read from the I64 tensor: row c of its [C, V/C] view lists the token
  // ids of centroid c. Empty without use_ordered_embeddings.
  std::vector<int> token_ordering;
  // That tensor as stored (I64, or I32 in a GGUF); null when the checkpoint has none.
  const Int64Tensor* token_ordering_tensor() const;
};

// `path`: a directory with config.json (model_type gemma4_assistant) and model.safetensors (or
// a sharded index), or a gemma4-assistant GGUF file (model/assistant_gguf.h). Checks the config against `target` (pair_assistant) and every tensor's
// presence and shape. Throws g4::Error naming the file, tensor or field.
std::unique_ptr<AssistantModel> load_assistant(const std::filesystem::path& path, const Model& target);
// The same without a target (`g4 quantize`): every check but the pairing; `pairing` stays unset.
std::unique_ptr<AssistantModel> open_assistant(const std::filesystem::path& path, const Model* target = nullptr);
// `path` holds a drafter: a directory whose config.json says model_type gemma4_assistant, or a
// GGUF whose general.architecture is gemma4-assistant.
bool is_assistant_checkpoint(const std::filesystem::path& path);

}  // namespace g4
