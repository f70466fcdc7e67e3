#include "model/model.h"

#include "platform/error.h"

namespace g4 {

std::unique_ptr<Model> load_model(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw Error(path.string() + ": expected a model directory holding config.json and model.safetensors");
  auto m = std::make_unique<Model>();
  m->path = path;
  const fs::path cfg = path / "config.json";
  if (!fs::exists(cfg)) throw Error(path.string() + ": no config.json in this directory");
  m->config = load_config(cfg);
  m->archive = SafetensorsArchive::open(path);
  m->weights = bind_weights(m->config, m->archive.tensors(), path.string());
  return m;
}

}  // namespace g4
