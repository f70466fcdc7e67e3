#include "model/synth.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "platform/atomic_file.h"
#include "platform/error.h"

namespace g4 {

namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// How a tensor's values are drawn: uniform in center ± spread (uniform keeps generation cheap;
// spread = std·√3 gives the intended standard deviation).
struct Init {
  float center, spread;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Scales chosen like the shared fixtures: projections preserve the activation scale
// (std 1/√fan_in), norm weights ≈ 1, q/k norms ≈ 0.5, the final norm ≈ 3 so logits have a
// std of about 3 (softcap exercised, never saturated), layer_scalar ≈ 1 ± 0.1.
Init init_for(const TensorSpec& s) {
  const std::string& n = s.name;
  const float sqrt3 = std::sqrt(3.0f);
  auto proj = [&](int64_t fan_in) { return Init{0.0f, sqrt3 / std::sqrt(float(fan_in))}; };
  if (ends_with(n, "layer_scalar")) return {1.0f, 0.1f};
  // The vision tower's clamp bounds: wide enough that unit-scale activations rarely touch them.
  if (ends_with(n, "put_min")) return {-6.0f, 1.0f};
  if (ends_with(n, "put_max")) return {6.0f, 1.0f};
  if (ends_with(n, "std_scale")) return {1.0f, 0.1f};
  if (ends_with(n, "std_bias")) return {0.0f, 0.1f};
  if (ends_with(n, "q_norm.weight") || ends_with(n, "k_norm.weight")) return {0.5f, 0.05f};
  if (n == "norm.weight" || ends_with(n, ".norm.weight") || ends_with(n, "language_model.norm.weight"))
    return {3.0f, 0.1f};
  if (ends_with(n, "norm.weight") || ends_with(n, "layernorm.weight") || ends_with(n, "router.scale") ||
      ends_with(n, "per_expert_scale"))
    return {1.0f, 0.1f};
  if (ends_with(n, "embed_tokens.weight")) return proj(s.shape[1]);           // [V, H]: x·√H has rms ≈ 1
  if (ends_with(n, "embed_tokens_per_layer.weight")) return {0.0f, sqrt3 / 16.0f};
  return proj(s.shape.back());  // [out, in] and [E, out, in]
}

}  // namespace

void fill_synth_tensor(const TensorSpec& s, std::byte* out, uint64_t seed) {
  const Init init = init_for(s);
  uint64_t state = seed ^ fnv1a(s.name);
  const uint64_t n = dtype_size(s.dtype) ? s.nbytes() / dtype_size(s.dtype) : 0;  // per-element types only
  for (uint64_t i = 0; i < n; ++i) {
    // 24 random bits -> u in [-1, 1)
    const float u = float(int32_t(splitmix64(state) >> 40) - (1 << 23)) * (1.0f / float(1 << 23));
    const float v = init.center + init.spread * u;
    switch (s.dtype) {
      case DType::F32: std::memcpy(out + i * 4, &v, 4); break;
      case DType::F16: {
        uint16_t h = f32_to_f16(v);
        std::memcpy(out + i * 2, &h, 2);
        break;
      }
      case DType::BF16: {
        uint16_t h = f32_to_bf16(v);
        std::memcpy(out + i * 2, &h, 2);
        break;
      }
      default: break;  // block types are never synthesised (unreachable: n is 0 for them)
    }
  }
}

namespace {

void write_json_atomic(const std::filesystem::path& p, const nlohmann::json& j) {
  write_file_atomically(p, j.dump(2) + "\n");
}

}  // namespace

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c, DType dt, const std::string& pre) {
  const int64_t H = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers, P = c.hidden_size_per_layer_input;
  std::vector<TensorSpec> s;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) { s.push_back({pre + name, dt, std::move(shape)}); };
  add("embed_tokens.weight", {V, H});
  if (P > 0) {
    add("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, L * P});
    add("per_layer_model_projection.weight", {L * P, H});
    add("per_layer_projection_norm.weight", {P});
  }
  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    const std::string l = "layers." + std::to_string(i) + ".";
    const int64_t hd = p.head_dim, q = int64_t(c.num_attention_heads) * hd, kv = int64_t(p.kv_heads) * hd;
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm"})
      add(l + norm + ".weight", {H});
    add(l + "self_attn.q_proj.weight", {q, H});
    add(l + "self_attn.q_norm.weight", {hd});
    if (!p.kv_shared) {
      add(l + "self_attn.k_proj.weight", {kv, H});
      add(l + "self_attn.k_norm.weight", {hd});
      if (!p.k_eq_v) add(l + "self_attn.v_proj.weight", {kv, H});
    }
    add(l + "self_attn.o_proj.weight", {H, q});
    add(l + "mlp.gate_proj.weight", {p.mlp_width, H});
    add(l + "mlp.up_proj.weight", {p.mlp_width, H});
    add(l + "mlp.down_proj.weight", {H, p.mlp_width});
    add(l + "layer_scalar", {1});
    if (P > 0) {
      add(l + "per_layer_input_gate.weight", {P, H});
      add(l + "per_layer_projection.weight", {H, P});
      add(l + "post_per_layer_input_norm.weight", {H});
    }
    if (p.moe) {
      const int64_t E = c.num_experts, Ie = c.moe_intermediate_size;
      add(l + "router.proj.weight", {E, H});
      add(l + "router.scale", {H});
      add(l + "router.per_expert_scale", {E});
      add(l + "experts.gate_up_proj", {E, 2 * Ie, H});
      add(l + "experts.down_proj", {E, H, Ie});
      add(l + "pre_feedforward_layernorm_2.weight", {H});
      add(l + "post_feedforward_layernorm_1.weight", {H});
      add(l + "post_feedforward_layernorm_2.weight", {H});
    }
  }
  add("norm.weight", {H});
  return s;
}

std::vector<TensorSpec> vision_tensor_specs(const VisionConfig& v, int64_t text_hidden, DType dt) {
  const int64_t Hv = v.hidden_size, Iv = v.intermediate_size, d = v.head_dim;
  std::vector<TensorSpec> s;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, DType t) { s.push_back({name, t, std::move(shape)}); };
  const std::string tw = "model.vision_tower.";
  add(tw + "patch_embedder.input_proj.weight", {Hv, v.patch_width()}, dt);
  add(tw + "patch_embedder.position_embedding_table", {2, v.position_embedding_size, Hv}, dt);
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    add(name + ".linear.weight", {out, in}, dt);
    if (v.use_clipped_linears)  // 0-d F32 bounds, as in the fixtures
      for (const char* b : {".input_min", ".input_max", ".output_min", ".output_max"}) add(name + b, {}, DType::F32);
  };
  for (int64_t i = 0; i < v.num_hidden_layers; ++i) {
    const std::string l = tw + "encoder.layers." + std::to_string(i) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm"})
      add(l + norm + ".weight", {Hv}, dt);
    linear(l + "self_attn.q_proj", v.q_width(), Hv);
    linear(l + "self_attn.k_proj", v.kv_width(), Hv);
    linear(l + "self_attn.v_proj", v.kv_width(), Hv);
    linear(l + "self_attn.o_proj", Hv, v.q_width());
    add(l + "self_attn.q_norm.weight", {d}, dt);
    add(l + "self_attn.k_norm.weight", {d}, dt);
    linear(l + "mlp.gate_proj", Iv, Hv);
    linear(l + "mlp.up_proj", Iv, Hv);
    linear(l + "mlp.down_proj", Hv, Iv);
  }
  if (v.standardize) {
    add(tw + "std_bias", {Hv}, dt);
    add(tw + "std_scale", {Hv}, dt);
  }
  add("model.embed_vision.embedding_projection.weight", {text_hidden, Hv}, dt);
  return s;
}

namespace {

// processor_config.json as released (Gemma4Processor), for this tower's patch size, pooling and budget.
nlohmann::json processor_config(const VisionConfig& v) {
  const int budget = v.default_image_budget();
  return {{"processor_class", "Gemma4Processor"},
          {"image_seq_length", budget},
          {"image_processor",
           {{"image_processor_type", "Gemma4ImageProcessor"},
            {"do_convert_rgb", true},
            {"do_resize", true},
            {"resample", 3},
            {"do_rescale", true},
            {"rescale_factor", 1.0 / 255.0},
            {"do_normalize", false},
            {"image_mean", {0.0, 0.0, 0.0}},
            {"image_std", {1.0, 1.0, 1.0}},
            {"patch_size", v.patch_size},
            {"max_soft_tokens", budget},
            {"pooling_kernel_size", v.pooling_kernel_size}}}};
}

}  // namespace

std::vector<std::filesystem::path> write_synth_checkpoint(const ModelConfig& c, const SynthOptions& o,
                                                          const std::filesystem::path& dir, const VisionConfig* vision) {
  std::filesystem::create_directories(dir);
  auto specs = checkpoint_tensor_specs(c, o.dtype, o.prefix);
  if (vision)
    for (TensorSpec& s : vision_tensor_specs(*vision, c.hidden_size, o.dtype)) specs.push_back(std::move(s));
  // Remove an older checkpoint's safetensors so a single file and shards never mix.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f == "model.safetensors.index.json" || (f.rfind("model", 0) == 0 && ends_with(f, ".safetensors")))
      std::filesystem::remove(e.path());
  }
  auto files = write_safetensors_sharded(
      dir, specs, [&](const TensorSpec& s, std::byte* out) { fill_synth_tensor(s, out, o.seed); }, o.shard_bytes);
  nlohmann::json cfg = config_to_json(c);
  cfg["torch_dtype"] = o.dtype == DType::F32 ? "float32" : o.dtype == DType::BF16 ? "bfloat16" : "float16";
  cfg["g4_synth"] = {{"seed", o.seed}, {"note", "random weights made by g4 synth: output is noise by design"}};
  if (vision) {
    cfg["vision_config"] = vision_config_to_json(*vision);
    cfg["vision_soft_tokens_per_image"] = vision->default_output_length;
    write_json_atomic(dir / "processor_config.json", processor_config(*vision));
  } else {
    std::filesystem::remove(dir / "processor_config.json");  // an older multimodal synth's
  }
  write_json_atomic(dir / "config.json", cfg);
  nlohmann::json gen = {{"bos_token_id", c.bos_token_id}, {"pad_token_id", c.pad_token_id}};
  std::vector<int> stops;
  for (int id : {1, 106, 50})  // <eos>, <turn|>, <|tool_response>
    if (id < c.vocab_size) stops.push_back(id);
  gen["eos_token_id"] = stops;
  write_json_atomic(dir / "generation_config.json", gen);
  return files;
}

}  // namespace g4
