#include "model/assistant.h"

#include <nlohmann/json.hpp>

#include "model/assistant_gguf.h"
#include "model/config_fields.h"
#include "platform/error.h"

namespace g4 {

namespace {

using TensorMap = std::map<std::string, TensorView>;

// A tensor outside the stack's "model." prefix, with an exact shape. `shown` is its name in the
// checkpoint (the GGUF name for a GGUF drafter).
const TensorView* drafter_tensor(const TensorMap& tensors, const std::string& source, const std::string& name,
                                 const std::string& shown, const std::vector<int64_t>& shape) {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(source + ": missing tensor '" + shown + "' (expected shape " + shape_str(shape) + ")");
  const TensorView& t = it->second;
  if (t.shape != shape)
    throw Error(t.file + ": tensor '" + shown + "' has shape " + shape_str(t.shape) + ", expected " + shape_str(shape) +
                " from the config");
  return &t;
}

// token_ordering [V] (I64, or I32 in a GGUF): a permutation of the vocabulary, kept as ints.
std::vector<int> read_token_ordering(const Int64Tensor& t, int64_t V) {
  if (t.shape != std::vector<int64_t>{V})
    throw Error(t.file + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + ", expected " + shape_str({V}));
  std::vector<int> ids(static_cast<size_t>(V));
  std::vector<bool> seen(static_cast<size_t>(V), false);
  for (int64_t i = 0; i < V; ++i) {
    const int64_t id = t.value(i);
    if (id < 0 || id >= V || seen[size_t(id)])
      throw Error(t.file + ": tensor '" + t.name + "' element " + std::to_string(i) + " = " + std::to_string(id) +
                  ": not a permutation of the vocabulary [0, " + std::to_string(V) + ")");
    seen[size_t(id)] = true;
    ids[size_t(i)] = int(id);
  }
  return ids;
}

// Where the drafter's tensors are, and what each is called in its file.
struct DrafterTensors {
  const TensorMap& weights;
  const Int64Tensor* ordering;  // null when the checkpoint has none
  bool gguf;
  std::string shown(const std::string& st_name) const {
    return gguf ? assistant_gguf_name(st_name).value_or(st_name) : st_name;
  }
};

// The tensors around the stack, and what the stack's products stream.
void bind_drafter_extras(AssistantModel& d, const DrafterTensors& in) {
  const AssistantConfig& c = d.config;
  const std::string src = d.path.string();
  const int64_t Hd = c.text.hidden_size, Ht = c.backbone_hidden_size, V = c.text.vocab_size;
  auto tensor = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return drafter_tensor(in.weights, src, name, in.shown(name), shape);
  };
  d.pre_projection = tensor("pre_projection.weight", {Hd, 2 * Ht});
  d.post_projection = tensor("post_projection.weight", {Ht, Hd});
  if (c.use_ordered_embeddings) {
    d.centroids = tensor("masked_embedding.centroids.weight", {c.num_centroids, Hd});
    const std::string ordering = in.gguf ? kGgufTokenOrdering : "masked_embedding.token_ordering";
    if (!in.ordering) throw Error(src + ": missing tensor '" + ordering + "' (expected I64 shape " + shape_str({V}) + ")");
    d.token_ordering = read_token_ordering(*in.ordering, V);
    d.stack->weights.lm_head = d.centroids;  // a step reads all centroids, and only candidates' head rows
  }
}

// The stack from a safetensors directory, or from a gemma4-assistant GGUF file.
void open_stack(AssistantModel& d) {
  Model& m = *d.stack;
  const std::string src = d.path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(d.path, ec))
    if (auto g = lone_gguf(d.path)) d.path = m.path = *g;  // a GGUF repo snapshot: its one file
  if (looks_like_gguf(d.path)) {
    m.format = "gguf";
    m.gguf = GgufFile::open(d.path);
    d.config = assistant_config_from_gguf(*m.gguf);
    m.gguf_views = assistant_gguf_tensors_as_hf(*m.gguf);
  } else {
    if (!std::filesystem::is_directory(d.path, ec))
      throw Error(src + ": expected a drafter directory holding config.json and model.safetensors, or a gemma4-assistant .gguf file");
    d.config = load_assistant_config(d.path / "config.json");
    m.archive = SafetensorsArchive::open(d.path);
  }
  m.config = d.config.text;
}

// Binds the stack's weights and the tensors around it (after open_stack).
void bind_drafter(AssistantModel& d) {
  const std::filesystem::path& path = d.path;
  Model& m = *d.stack;
  const bool gguf = m.gguf != nullptr;
  const TensorMap& tensors = gguf ? m.gguf_views : m.archive.tensors();
  try {
    m.weights = bind_weights(d.config.text, tensors, path.string());
  } catch (const Error& e) {
    if (!gguf) throw;
    throw Error(std::string(e.what()) + " [in a gemma4-assistant GGUF, model.layers.i.* are the blk.i.* tensors, " +
                "model.embed_tokens is token_embd, model.norm is output_norm: docs/speculative.md]");
  }
  if (m.weights.prefix != "model.")
    throw Error(path.string() + ": drafter tensors must sit under 'model.' (found '" + m.weights.prefix +
                "embed_tokens.weight')");
  const Int64Tensor* ordering = d.token_ordering_tensor();
  if (!ordering && !gguf && m.archive.find("masked_embedding.token_ordering"))
    throw Error(m.archive.find("masked_embedding.token_ordering")->file +
                ": tensor 'masked_embedding.token_ordering' must be I64 (token ids)");
  bind_drafter_extras(d, {tensors, ordering, gguf});
}

}  // namespace

std::unique_ptr<AssistantModel> load_assistant(const std::filesystem::path& path, const Model& target) {
  return open_assistant(path, &target);
}

std::unique_ptr<AssistantModel> open_assistant(const std::filesystem::path& path, const Model* target) {
  auto d = std::make_unique<AssistantModel>();
  d->path = path;
  d->stack = std::make_unique<Model>();
  d->stack->path = path;
  open_stack(*d);
  // The pair is checked before any tensor, so a mismatched drafter is refused for that first.
  if (target) d->pairing = pair_assistant(d->config, target->config, path.string(), target->path.string());
  bind_drafter(*d);
  return d;
}

bool is_assistant_checkpoint(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    if (auto g = lone_gguf(path)) return is_assistant_checkpoint(*g);
  if (looks_like_gguf(path)) return GgufFile::open(path)->get_string("general.architecture") == "gemma4-assistant";
  if (!std::filesystem::is_regular_file(path / "config.json", ec)) return false;
  const auto j = read_config_json(path / "config.json");
  return j.is_object() && j.value("model_type", "") == "gemma4_assistant";
}

const Int64Tensor* AssistantModel::token_ordering_tensor() const {
  const auto& ints = stack->gguf ? stack->gguf->int_tensors() : stack->archive.int64_tensors();
  auto it = ints.find(stack->gguf ? kGgufTokenOrdering : "masked_embedding.token_ordering");
  return it == ints.end() ? nullptr : &it->second;
}

}  // namespace g4
