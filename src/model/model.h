// A loaded Gemma 4 text model: config + mapped checkpoint + validated weight views.
#pragma once
#include <filesystem>
#include <memory>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace g4 {

struct Model {
  std::filesystem::path path;
  ModelConfig config;
  SafetensorsArchive archive;  // owns the mmaps the weight views point into
  ModelWeights weights;
};

// `path`: a Hugging Face directory (config.json + model.safetensors or a sharded index).
// Everything is validated before this returns; throws g4::Error otherwise.
std::unique_ptr<Model> load_model(const std::filesystem::path& path);

}  // namespace g4
