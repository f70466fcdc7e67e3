#include "model/model.h"

#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "platform/error.h"

namespace g4 {

std::vector<std::filesystem::path> Model::files() const {
  if (gguf) return {gguf->path()};
  return archive.files();
}

uint64_t Model::data_bytes() const { return gguf ? gguf->data_bytes() : archive.data_bytes(); }

bool Model::owns(const std::byte* p) const {
  for (const HugePageBuffer& b : owned_data)
    if (p >= b.data() && p < b.data() + b.size()) return true;
  return false;
}

bool Model::mapped(const std::byte* p) const { return gguf ? gguf->contains(p) : archive.contains(p); }

const TensorView* Model::replace_view(const TensorView** slot, TensorView v) {
  const TensorView* old = *slot;
  owned_views.push_back(std::move(v));
  const TensorView* now = &owned_views.back();
  if (weights.embed_tokens == old) weights.embed_tokens = now;
  if (weights.lm_head == old) weights.lm_head = now;
  *slot = now;
  return now;
}

void Model::check_unchanged() const {
  if (gguf) gguf->check_unchanged();
  else archive.check_unchanged();
}

namespace {

std::unique_ptr<Model> load_gguf(const std::filesystem::path& file, const std::filesystem::path& shown) {
  auto m = std::make_unique<Model>();
  m->path = shown;
  m->format = "gguf";
  m->gguf = GgufFile::open(file);
  m->config = config_from_gguf(*m->gguf);
  m->weights = bind_gguf_weights(m->config, *m->gguf, m->gguf_views);
  return m;
}

}  // namespace

std::optional<std::filesystem::path> lone_gguf(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir / "config.json", ec)) return std::nullopt;
  std::vector<fs::path> ggufs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".gguf") ggufs.push_back(e.path());
  if (ggufs.size() > 1)
    throw Error(dir.string() + ": no config.json, and " + std::to_string(ggufs.size()) + " .gguf files: name the one to load");
  if (ggufs.empty()) return std::nullopt;
  return ggufs[0];
}

std::unique_ptr<Model> load_model(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (looks_like_gguf(path)) return load_gguf(path, path);
    throw Error(path.string() + ": not a GGUF file and not a model directory (expected a .gguf file, or a directory "
                                "holding config.json and model.safetensors)");
  }
  if (!fs::is_directory(path, ec))
    throw Error(path.string() + ": expected a model directory holding config.json and model.safetensors, or a .gguf file");
  const fs::path cfg = path / "config.json";
  if (!fs::exists(cfg)) {
    if (auto g = lone_gguf(path)) return load_gguf(*g, *g);
    throw Error(path.string() + ": no config.json (or single .gguf file) in this directory");
  }
  auto m = std::make_unique<Model>();
  m->path = path;
  m->config = load_config(cfg);
  m->archive = SafetensorsArchive::open(path);
  m->weights = bind_weights(m->config, m->archive.tensors(), path.string());
  for (const auto& [name, t] : m->archive.int64_tensors())
    m->weights.notes.push_back("ignored I64 tensor " + name + " (no text decoder weight is an integer table)");
  return m;
}

}  // namespace g4
