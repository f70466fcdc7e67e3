#include "model/assistant.h"

#include "platform/error.h"

namespace g4 {

namespace {

// A tensor outside the stack's "model." prefix, with an exact shape.
const TensorView* drafter_tensor(const SafetensorsArchive& ar, const std::string& source, const std::string& name,
                                 const std::vector<int64_t>& shape) {
  const TensorView* t = ar.find(name);
  if (!t) throw Error(source + ": missing tensor '" + name + "' (expected shape " + shape_str(shape) + ")");
  if (t->shape != shape)
    throw Error(t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " + shape_str(shape) +
                " from the config");
  return t;
}

// token_ordering [V] (I64): a permutation of the vocabulary, kept as ints.
std::vector<int> read_token_ordering(const SafetensorsArchive& ar, const std::string& source, int64_t V) {
  const std::string name = "masked_embedding.token_ordering";
  auto it = ar.int64_tensors().find(name);
  if (it == ar.int64_tensors().end()) {
    if (ar.find(name)) throw Error(ar.find(name)->file + ": tensor '" + name + "' must be I64 (token ids)");
    throw Error(source + ": missing tensor '" + name + "' (expected I64 shape " + shape_str({V}) + ")");
  }
  const Int64Tensor& t = it->second;
  if (t.shape != std::vector<int64_t>{V})
    throw Error(t.file + ": tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected " + shape_str({V}));
  std::vector<int> ids(static_cast<size_t>(V));
  std::vector<bool> seen(static_cast<size_t>(V), false);
  for (int64_t i = 0; i < V; ++i) {
    const int64_t id = t.value(i);
    if (id < 0 || id >= V || seen[size_t(id)])
      throw Error(t.file + ": tensor '" + name + "' element " + std::to_string(i) + " = " + std::to_string(id) +
                  ": not a permutation of the vocabulary [0, " + std::to_string(V) + ")");
    seen[size_t(id)] = true;
    ids[size_t(i)] = int(id);
  }
  return ids;
}

// The tensors around the stack, and what the stack's products stream.
void bind_drafter_extras(AssistantModel& d) {
  const AssistantConfig& c = d.config;
  const SafetensorsArchive& ar = d.stack->archive;
  const std::string src = d.path.string();
  const int64_t Hd = c.text.hidden_size, Ht = c.backbone_hidden_size, V = c.text.vocab_size;
  d.pre_projection = drafter_tensor(ar, src, "pre_projection.weight", {Hd, 2 * Ht});
  d.post_projection = drafter_tensor(ar, src, "post_projection.weight", {Ht, Hd});
  if (c.use_ordered_embeddings) {
    d.centroids = drafter_tensor(ar, src, "masked_embedding.centroids.weight", {c.num_centroids, Hd});
    d.token_ordering = read_token_ordering(ar, src, V);
    d.stack->weights.lm_head = d.centroids;  // a step reads all centroids, and only candidates' head rows
  }
}

}  // namespace

std::unique_ptr<AssistantModel> load_assistant(const std::filesystem::path& path, const Model& target) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw Error(path.string() + ": expected a drafter directory holding config.json and model.safetensors");
  auto d = std::make_unique<AssistantModel>();
  d->path = path;
  d->config = load_assistant_config(path / "config.json");
  d->pairing = pair_assistant(d->config, target.config, path.string(), target.path.string());
  d->stack = std::make_unique<Model>();
  d->stack->path = path;
  d->stack->config = d->config.text;
  d->stack->archive = SafetensorsArchive::open(path);
  d->stack->weights = bind_weights(d->config.text, d->stack->archive.tensors(), path.string());
  if (d->stack->weights.prefix != "model.")
    throw Error(path.string() + ": drafter tensors must sit under 'model.' (found '" + d->stack->weights.prefix +
                "embed_tokens.weight')");
  bind_drafter_extras(*d);
  return d;
}

}  // namespace g4
