#include "model/vision_model.h"

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_fields.h"
#include "platform/error.h"

namespace g4 {

std::unique_ptr<VisionModel> load_vision_model(const std::filesystem::path& dir) {
  const std::filesystem::path config_path = dir / "config.json";
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

}  // namespace g4
