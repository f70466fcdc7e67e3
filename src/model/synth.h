// Random-weight Gemma 4 checkpoints in a real geometry (`g4 synth`). Tensors are generated and
// written one at a time, so an E2B-size model never needs its size in RAM. Values are a pure
// function of (seed, tensor name), independent of write order or sharding.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/assistant_config.h"
#include "model/safetensors.h"
#include "model/vision_config.h"

namespace g4 {

struct SynthOptions {
  DType dtype = DType::F32;
  uint64_t seed = 1;
  uint64_t shard_bytes = 4ull << 30;  // split into shards + index above this size
  std::string prefix = "model.language_model.";
};

// The tensor list (names, dtypes, shapes) a checkpoint of config `c` holds.
std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c, DType dtype, const std::string& prefix);

// The deterministic random values `g4 synth` writes for one tensor (a function of seed + name).
void fill_synth_tensor(const TensorSpec& spec, std::byte* out, uint64_t seed);

// The vision tower's and projector's tensors (model.vision_tower.*, model.embed_vision.*) for a
// tower `v` beside a text decoder of width text_hidden; the clamp bounds are 0-d F32 tensors.
std::vector<TensorSpec> vision_tensor_specs(const VisionConfig& v, int64_t text_hidden, DType dtype);

// Writes config.json, generation_config.json and model.safetensors (or shards) into `dir`.
// With `vision`, a multimodal checkpoint: the tower's tensors in the same safetensors, config.json
// with its vision_config (and c's media token ids), and processor_config.json.
// Returns the safetensors files written.
std::vector<std::filesystem::path> write_synth_checkpoint(const ModelConfig& c, const SynthOptions& o,
                                                          const std::filesystem::path& dir,
                                                          const VisionConfig* vision = nullptr);

// The same for an assistant drafter (model/assistant_synth.cpp): config.json and model.safetensors
// in the released *-it-assistant layout (the stack under "model.", o.prefix unused), its
// token_ordering a random permutation drawn from the seed. Returns the file written.
std::filesystem::path write_synth_assistant(const AssistantConfig& d, const SynthOptions& o, const std::filesystem::path& dir);

}  // namespace g4
