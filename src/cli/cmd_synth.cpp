// g4 synth: write a random-weight Gemma 4 checkpoint (config, safetensors, tokenizer) in a real
// geometry, so g4 runs end to end on a fresh machine with nothing downloaded.
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "model/presets.h"
#include "model/synth.h"
#include "platform/error.h"
#include "text/synth_tokenizer.h"

namespace g4::cli {
namespace {

const char* kUsage =
    "usage: g4 synth --preset NAME --out DIR [--dtype f32|bf16|f16] [--seed N] [--vocab N]\n"
    "                [--window N] [--shard-mb N]\n\n"
    "Writes config.json, generation_config.json, model.safetensors (sharded with an index above\n"
    "--shard-mb, default 4096) with random weights, generated and written tensor by tensor, and a\n"
    "small Gemma-format tokenizer.json, so the directory runs with generate and serve as it is.\n"
    "A NAME-vision preset adds the vision tower and projector (model.vision_tower.*,\n"
    "model.embed_vision.*), its vision_config, the image token ids and processor_config.json: a\n"
    "multimodal checkpoint that takes images (generate --image, serve, bench --image).\n"
    "Random weights produce noise by design; the numbers are deterministic in --seed.\n\n"
    "  --preset NAME   tiny-e | tiny-31b | tiny-moe (small, same features as the test fixtures)\n"
    "                  e2b | e4b | 12b | 26b-a4b | 31b (released geometries; large files)\n"
    "                  tiny-e-vision (tiny-e + a 2-layer, 48-wide tower like the vision fixture's,\n"
    "                  budget 70; image ids moved to 500..502 in a small vocab)\n"
    "                  e2b-vision | e4b-vision (16 layers, 768 wide, clipped linears) |\n"
    "                  26b-a4b-vision | 31b-vision (27 layers, 1152 wide, standardize)\n"
    "                  tiny-assistant | e2b-assistant | e4b-assistant: an assistant drafter\n"
    "                  (gemma4_assistant, centroid head) for tiny-e | e2b | e4b; give it the\n"
    "                  target's --vocab and --window.\n"
    "                  Writes config.json and model.safetensors only (the target has the tokenizer)\n"
    "  --dtype T       weight dtype (default f32 for tiny presets, bf16 otherwise)\n"
    "  --seed N        default 1\n"
    "  --vocab N       override the vocabulary size (262144 pairs with a real Gemma tokenizer)\n"
    "  --window N      override sliding_window (e.g. 4, to exercise the ring cache in tests)";

// --vocab and --window onto a preset's config (a target's, or a drafter's stack).
void apply_overrides(const Args& a, ModelConfig& c) {
  if (a.has("--vocab")) {
    const long long v = a.get_int("--vocab", 0);
    if (v < 512 || v > (1 << 24)) throw Error("--vocab " + std::to_string(v) + ": must be in [512, 16777216]");
    c.vocab_size = int(v);
    if (c.hidden_size_per_layer_input > 0 || c.vocab_size_per_layer_input > 0) c.vocab_size_per_layer_input = int(v);
  }
  if (a.has("--window")) {
    const long long w = a.get_int("--window", 0);
    if (w < 1) throw Error("--window " + std::to_string(w) + ": must be >= 1");
    c.sliding_window = int(w);
  }
}

// --dtype, --seed and --shard-mb; dt is the dtype as named.
SynthOptions synth_options(const Args& a, const std::string& preset, std::string& dt) {
  SynthOptions o;
  dt = a.get_or("--dtype", preset.rfind("tiny", 0) == 0 ? "f32" : "bf16");
  if (dt == "f32") o.dtype = DType::F32;
  else if (dt == "bf16") o.dtype = DType::BF16;
  else if (dt == "f16") o.dtype = DType::F16;
  else throw Error("--dtype '" + dt + "': expected f32, bf16 or f16");
  const long long seed = a.get_int("--seed", 1);
  if (seed < 0) throw Error("--seed must be >= 0");
  o.seed = uint64_t(seed);
  const long long shard_mb = a.get_int("--shard-mb", 4096);
  if (shard_mb < 1) throw Error("--shard-mb must be >= 1");
  o.shard_bytes = uint64_t(shard_mb) << 20;
  return o;
}

// An assistant drafter: the config checked the way the loader reads it, then the one file.
int run_drafter(const Args& a, const std::string& preset) {
  AssistantConfig d = preset_assistant_config(preset);
  apply_overrides(a, d.text);
  d = parse_assistant_config(assistant_config_to_json(d), "--preset " + preset);
  std::string dt;
  const SynthOptions o = synth_options(a, preset, dt);
  const std::string out = a.require("--out");
  std::fprintf(stderr, "synth %s: %s weights, seed %llu -> %s\n", preset.c_str(), dt.c_str(),
               (unsigned long long)o.seed, out.c_str());
  std::printf("%s\n", write_synth_assistant(d, o, out).string().c_str());
  return 0;
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--preset", "--out", "--dtype", "--seed", "--vocab", "--window", "--shard-mb"}, {});
  const std::string preset = a.require("--preset");
  for (const std::string& name : preset_assistant_names())
    if (preset == name) return run_drafter(a, preset);
  ModelConfig c = preset_config(preset);
  const std::optional<VisionConfig> vision = preset_vision_config(preset);
  apply_overrides(a, c);
  if (vision) set_media_token_ids(c);  // the released ids only when --vocab reaches them
  c.finalize();
  std::string dt;
  const SynthOptions o = synth_options(a, preset, dt);
  const std::string out = a.require("--out");

  uint64_t total = 0;
  for (const auto& s : checkpoint_tensor_specs(c, o.dtype, o.prefix)) total += s.nbytes();
  if (vision)
    for (const auto& s : vision_tensor_specs(*vision, c.hidden_size, o.dtype)) total += s.nbytes();
  std::fprintf(stderr, "synth %s: %s weights, %.1f MiB, seed %llu -> %s\n", preset.c_str(), dt.c_str(),
               double(total) / (1 << 20), (unsigned long long)o.seed, out.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const auto files = write_synth_checkpoint(c, o, out, vision ? &*vision : nullptr);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // So the directory is a complete checkpoint; its image pieces sit at config.json's ids.
  std::vector<std::pair<int, std::string>> moved;
  if (vision && *c.boi_token_id < 255999)
    moved = {{*c.boi_token_id, "<|image>"}, {*c.image_token_id, "<|image|>"}, {*c.eoi_token_id, "<image|>"}};
  text::write_synth_tokenizer(out, c.vocab_size, moved);
  for (const auto& f : files) std::printf("%s\n", f.string().c_str());
  std::printf("%s\n", (std::filesystem::path(out) / "tokenizer.json").string().c_str());
  std::fprintf(stderr, "wrote %zu safetensors file(s) in %.2f s\n", files.size(), secs);
  return 0;
}

const Registration reg{"synth", "write a random-weight Gemma 4 checkpoint (or assistant drafter) in a real geometry", kUsage, run};

}  // namespace
}  // namespace g4::cli
