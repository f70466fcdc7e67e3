// A loaded Gemma 4 vision tower and projector: its config, the mapped checkpoint and the bound,
// validated weights. Loaded beside the text Model from the same Hugging Face directory (the
// tensors share one safetensors set; each side binds only its own), or from a llama.cpp mmproj
// GGUF (model/vision_gguf.h).
#pragma once
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"

namespace g4 {

struct VisionModel {
  std::filesystem::path path;
  VisionConfig config;
  int64_t text_hidden = 0;  // H: the width of a soft token
  std::string format = "safetensors";  // "safetensors" | "gguf" (an mmproj file)
  SafetensorsArchive archive;
  std::unique_ptr<GgufFile> gguf;
  std::map<std::string, TensorView> gguf_views;  // the GGUF's tensors keyed by Hugging Face name
  std::vector<std::vector<float>> owned_data;    // tensors rearranged at load (gguf_views point into them)
  // Matrices copied out of the mapping and interleaved (vision_interleave.h), and their views
  // (a deque: the weights point at its elements, which never move).
  std::deque<std::vector<std::byte>> owned_bytes;
  std::deque<TensorView> owned_views;
  VisionWeights weights;
};

// `path`: the checkpoint the text model was loaded from. A Hugging Face directory (config.json +
// model.safetensors or a sharded index) with a vision_config gives its tower. nullptr when there
// is no vision tower there: config.json has no vision_config (a text-only checkpoint), or there
// is no config.json (a GGUF file or directory, whose tower would be a separate mmproj:
// vision_gguf.h). Throws g4::Error naming the file, field or tensor for a broken config or
// checkpoint.
std::unique_ptr<VisionModel> load_vision_model(const std::filesystem::path& path);

// As load_vision_model, but where there is no vision tower it throws
// "<path>: no vision tower (...)" saying why, for a caller that was handed an image.
std::unique_ptr<VisionModel> require_vision_model(const std::filesystem::path& path);

}  // namespace g4
