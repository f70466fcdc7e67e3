// Random-weight assistant drafters for `g4 synth --preset tiny-assistant|e2b-assistant`.
#include <nlohmann/json.hpp>

#include <cstring>
#include <numeric>
#include <random>

#include "model/synth.h"
#include "platform/atomic_file.h"

namespace g4 {

namespace {

// The drafter's tensors: the stack (q-only layers, final norm, the tied head) under "model.",
// then the projections around it and the centroid head's tables.
std::vector<TensorSpec> drafter_tensor_specs(const AssistantConfig& d, DType dt) {
  std::vector<TensorSpec> specs = checkpoint_tensor_specs(d.text, dt, "model.");
  const int64_t Hd = d.text.hidden_size, Ht = d.backbone_hidden_size;
  specs.push_back({"pre_projection.weight", dt, {Hd, 2 * Ht}});
  specs.push_back({"post_projection.weight", dt, {Ht, Hd}});
  if (d.use_ordered_embeddings) {
    specs.push_back({"masked_embedding.centroids.weight", dt, {d.num_centroids, Hd}});
    TensorSpec ordering{"masked_embedding.token_ordering", dt, {d.text.vocab_size}};
    ordering.int64 = true;
    specs.push_back(ordering);
  }
  return specs;
}

// A permutation of [0, V) as little-endian int64, a function of the seed.
void fill_token_ordering(const TensorSpec& s, std::byte* out, uint64_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(s.shape[0]));
  std::iota(ids.begin(), ids.end(), int64_t(0));
  std::mt19937_64 rng(seed ^ 0x6f7264657269ull);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::memcpy(out, ids.data(), ids.size() * 8);
}

}  // namespace

std::filesystem::path write_synth_assistant(const AssistantConfig& d, const SynthOptions& o, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto file = dir / "model.safetensors";
  write_safetensors(file, drafter_tensor_specs(d, o.dtype), [&](const TensorSpec& s, std::byte* out) {
    if (s.int64) fill_token_ordering(s, out, o.seed);
    else fill_synth_tensor(s, out, o.seed);
  });
  nlohmann::json cfg = assistant_config_to_json(d);
  cfg["torch_dtype"] = o.dtype == DType::F32 ? "float32" : o.dtype == DType::BF16 ? "bfloat16" : "float16";
  cfg["g4_synth"] = {{"seed", o.seed}, {"note", "random weights made by g4 synth: drafts are noise by design"}};
  write_file_atomically(dir / "config.json", cfg.dump(2) + "\n");
  return file;
}

}  // namespace g4
