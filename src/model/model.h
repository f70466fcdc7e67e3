// A loaded Gemma 4 text model: config + mapped checkpoint + validated weight views.
#pragma once
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "platform/huge_pages.h"

namespace g4 {

struct Model {
  std::filesystem::path path;
  ModelConfig config;
  // The checkpoint that owns the mmaps the weight views point into: a safetensors archive, or
  // (format == "gguf") a GGUF file plus its tensors re-keyed by Hugging Face name.
  std::string format = "safetensors";  // "safetensors" | "gguf"
  SafetensorsArchive archive;
  std::unique_ptr<GgufFile> gguf;
  std::map<std::string, TensorView> gguf_views;
  ModelWeights weights;
  // Weights held in memory rather than read through the mapping: re-encoded at load
  // (`--weights q8|q4`) or copied into huge pages (weight_placement.h). Their bytes and views;
  // a deque keeps view addresses stable for the pointers in `weights`.
  std::vector<HugePageBuffer> owned_data;
  std::deque<TensorView> owned_views;

  std::vector<std::filesystem::path> files() const;
  uint64_t data_bytes() const;  // bytes of tensor data mapped
  void check_unchanged() const;  // throws if a mapped file shrank since loading
  bool owns(const std::byte* p) const;  // p lies in owned_data (not in a checkpoint mapping)
  bool mapped(const std::byte* p) const;  // p lies in the checkpoint's file mappings
  // Keeps `v` in owned_views and points *slot at it, along with every other weight slot that
  // pointed at the same view (a tied LM head is the embedding, and stays it). Returns the new view.
  const TensorView* replace_view(const TensorView** slot, TensorView v);
};

// `path`: a Hugging Face directory (config.json + model.safetensors or a sharded index), a
// `.gguf` file (or any file starting with the GGUF magic), or a directory holding no
// config.json and exactly one .gguf file. Everything is validated before this returns;
// throws g4::Error otherwise.
std::unique_ptr<Model> load_model(const std::filesystem::path& path);
// The one .gguf file of a directory without config.json (a llama.cpp-style repo snapshot);
// nullopt when there is a config.json or no .gguf; throws g4::Error when there are several.
std::optional<std::filesystem::path> lone_gguf(const std::filesystem::path& dir);

}  // namespace g4
