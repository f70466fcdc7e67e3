// AssistantConfig: the hyper-parameters of a Gemma 4 "assistant" drafter (model_type
// gemma4_assistant, the released *-it-assistant checkpoints), parsed from its config.json, and
// the check that pairs it with a target: the drafter reads the target's embedding table, final
// hidden state and K/V cache, so their shapes must agree. docs/speculative.md describes the model.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace g4 {

struct AssistantConfig {
  int backbone_hidden_size = 0;          // H_t: the target's hidden size
  bool use_ordered_embeddings = false;   // the centroid-masked LM head
  int num_centroids = 2048;              // C
  int centroid_intermediate_top_k = 32;  // centroids kept per step
  bool tie_word_embeddings = true;       // the head is the drafter's own embed_tokens (always)
  // The drafter's decoder stack (text_config): H_d = text.hidden_size, 4 layers in released
  // drafters. Every layer's plan is marked KV-shared (no k_proj/v_proj); which target layer each
  // reads is the pairing's (AssistantPairing), not kv_source_layer.
  ModelConfig text;

  int tokens_per_centroid() const { return text.vocab_size / num_centroids; }
  // The widest input of any of the drafter's matrix products (pre_projection reads 2·H_t): what
  // a matmul context running the drafter must be planned for, beside the target's.
  int64_t widest_matmul_input() const {
    return std::max<int64_t>(2 * int64_t(backbone_hidden_size), text.widest_matmul_input());
  }
};

// `j` is the whole config.json; `source` names it in errors. Throws g4::Error naming the field.
AssistantConfig parse_assistant_config(const nlohmann::json& j, const std::string& source);
AssistantConfig load_assistant_config(const std::filesystem::path& config_json);
// The inverse, as the released checkpoints lay it out (used by `g4 synth`).
nlohmann::json assistant_config_to_json(const AssistantConfig& d);

// Which target layer each drafter layer type reads: the last target layer of that type that owns
// its K/V (a KV-shared target layer reads another's).
struct AssistantPairing {
  int sliding_layer = -1, full_layer = -1;
  int target_layer(LayerType t) const { return t == LayerType::Full ? full_layer : sliding_layer; }
};

// Checks drafter `d` against target `t` and returns the pairing. A mismatch throws g4::Error
// listing every field that differs with both values (hidden size, vocabulary, sliding window,
// head dims and KV heads per layer type, a layer type the target lacks). `drafter_source` and
// `target_source` name the two checkpoints.
AssistantPairing pair_assistant(const AssistantConfig& d, const ModelConfig& t, const std::string& drafter_source,
                            const std::string& target_source);

}  // namespace g4
