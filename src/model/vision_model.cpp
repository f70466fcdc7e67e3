#include "model/vision_model.h"

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_fields.h"
#include "platform/error.h"

namespace g4 {

std::unique_ptr<VisionModel> load_vision_model(const std::filesystem::path& dir) {
  const std::filesystem::path config_path = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config_path, ec)) return nullptr;  // GGUF: a tower is an mmproj
  const nlohmann::json root = read_config_json(config_path);
  std::optional<VisionConfig> vc = parse_vision_config(root, config_path.string());
  if (!vc) return nullptr;
  auto m = std::make_unique<VisionModel>();
  m->path = dir;
  m->config = *vc;
  m->text_hidden = parse_config(root, config_path.string()).hidden_size;
  m->archive = SafetensorsArchive::open(dir);
  m->weights = bind_vision_weights(m->config, m->text_hidden, m->archive.tensors(), dir.string());
  return m;
}

std::unique_ptr<VisionModel> require_vision_model(const std::filesystem::path& path) {
  if (auto m = load_vision_model(path)) return m;
  const bool hf = std::filesystem::is_regular_file(path / "config.json");
  throw Error(path.string() + ": no vision tower (" +
              (hf ? std::string("config.json has no vision_config: a text-only checkpoint")
                  : std::string("not a Hugging Face directory; a GGUF model's tower is a separate mmproj file")) +
              ")");
}

}  // namespace g4
