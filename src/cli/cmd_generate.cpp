// g4 generate: prompt -> streamed text through the engine (cache, sampling, stops, guard).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/args.h"
#include "cli/speculative_args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/compute_choice.h"
#include "cli/device_choice.h"
#include "cli/image_args.h"
#include "cli/output_grammar.h"
#include "cli/weights_at_load.h"
#include "engine/model_text.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/weight_placement.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "text/chat_template.h"
#include "text/detokenizer_stream.h"
#include "text/stop_tokens.h"
#include "text/tokenizer.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 generate --model MODEL (--prompt TEXT | --tokens LIST) [-n N] [--temperature T]\n"
    "                   [--seed S] [--top-k K] [--top-p P] [--min-p P] [--chat] [--system TEXT]\n"
    "                   [--tokenizer FILE] [--kv f32|f16|bf16|int8] [--chunk N] [--stop-on-degenerate]\n"
    "                   [--threads N] [--reference] [--weights q8|q4] [--weight-memory auto|huge|mapped]\n"
    "                   [--compute f32|bf16] [--json-schema FILE | --json-object | --grammar FILE]\n"
    "                   [--speculative off|ngram|draft] [--draft-k N] [--draft-model PATH] [--draft-p-min P]\n"
    "                   [--image FILE ... [--image-tokens N] [--mmproj FILE]] [--device cpu|vulkan[:N]|auto]\n\n"
    "Generates up to N tokens (default 64), printing text as it streams, then a summary line on\n"
    "stderr: prompt and generated tokens, prefill and decode tok/s, finish reason, degeneracy verdict.\n\n"
    "  --prompt TEXT        encoded with exactly one <bos> in front (needs a tokenizer)\n"
    "  --chat               wrap --prompt in the Gemma 4 chat template as a user turn\n"
    "  --tokens LIST        comma-separated ids, fed exactly as given\n"
    "  --tokenizer FILE     tokenizer.json (default: the one in the model directory)\n"
    "  --temperature T      0 = greedy (default 0.0)\n"
    "  --kv DTYPE           KV cache storage (default: the dtype policy's, see `g4 info`; f32 with\n"
    "                       --reference)\n"
    "  --chunk N            prefill chunk in tokens (default 256)\n"
    "  --stop-on-degenerate end generation once a loop is certain\n"
    "  --json-schema FILE   constrain the output to JSON valid against this JSON Schema (OpenAI's strict\n"
    "                       subset; an unsupported keyword is an error naming its path)\n"
    "  --json-object        constrain the output to one JSON object\n"
    "  --grammar FILE       constrain the output to this GBNF grammar (start rule: root)\n"
    "                       (the stderr summary then adds the grammar masks' time per token)\n"
    "  --threads N          SIMD kernels on N threads (default: all cores)\n"
    "  --reference          run the f32 reference loops instead (the spec; slow)\n"
    "  --weights q8|q4      re-encode weight matrices as Q8_0 / Q4_0 in memory at load; stderr reports\n"
    "                       the time and how far the logits moved on an 8-token probe (before: the\n"
    "                       checkpoint's weights, f32 compute; after: the run's own path)\n"
    "  --compute f32|bf16   compute dtype (default: the device policy; bf16 where the CPU has\n"
    "                       confirmed AVX512_BF16 and the weights are bf16; see `g4 info`; f32 also\n"
    "                       keeps activations f32 for q8/q4 weights instead of int8 products on VNNI)\n"
    "  --weight-memory M    auto (default): copy the streamed matrices into 2 MiB huge pages when THP\n"
    "                       is on and they fit in MemAvailable; huge: always; mapped: read the mapping\n") +
    kSpeculativeHelp + kImageHelp + "  (--image needs --chat: the images come first in the user turn, then --prompt)\n" +
    kDeviceHelp + kModelHelp;

class DetokStream : public TokenTextStream {
 public:
  explicit DetokStream(const text::Tokenizer& t) : d_(t) {}
  std::string push(int token) override { return d_.push(token); }
  std::string flush() override { return d_.finish(); }

 private:
  text::StreamingDetokenizer d_;
};

// --weights' first probe, then placement (--weight-memory) unless the reference loops run.
std::optional<WeightsAtLoad> load_weights(const Args& a, Model& m, int threads) {
  ThreadPool pool(threads);
  std::optional<WeightsAtLoad> requant = start_weights_at_load(a, m, pool, "[g4]");
  if (!a.has("--reference")) {
    const PlacementReport pr = place_weights(m, weight_memory_from_flag(a.get_or("--weight-memory", "auto")), &pool);
    std::fprintf(stderr, "[g4] weights: %s\n", describe_placement(pr).c_str());
  }
  return requant;
}

// --tokenizer or the model's own; with --tokens a missing one is only a warning.
std::optional<text::Tokenizer> load_tokenizer(const Args& a, const Model& m) {
  std::optional<std::filesystem::path> tokenizer_file;
  if (auto tf = a.get("--tokenizer")) tokenizer_file = *tf;
  try {
    return load_model_tokenizer(m, tokenizer_file);
  } catch (const Error& e) {
    if (a.has("--prompt") || tokenizer_file) throw;
    std::fprintf(stderr, "warning: %s (not needed with --tokens)\n", e.what());
  }
  return std::nullopt;
}

// --prompt (encoded with one <bos>, or wrapped in the chat template with --chat) or --tokens.
// With images (--chat only), each is a part of the user turn before the text, its placeholder
// expanded to its span.
std::vector<int> prompt_tokens(const Args& a, const std::filesystem::path& dir, const std::optional<text::Tokenizer>& tok,
                               const Model& m, const std::vector<std::shared_ptr<PromptImage>>& images) {
  std::vector<int> prompt;
  auto p = a.get("--prompt");
  if (!images.empty() && !(p && a.has("--chat"))) throw Error("--image needs --chat and --prompt");
  if (!p) return parse_int_list(a.require("--tokens"), "--tokens");
  if (!tok) throw Error(dir.string() + ": no tokenizer.json; pass --tokenizer FILE or use --tokens");
  if (a.has("--chat")) {
    nlohmann::json messages = nlohmann::json::array();
    if (auto sys = a.get("--system")) messages.push_back({{"role", "system"}, {"content", *sys}});
    nlohmann::json content = nlohmann::json::array();
    for (size_t i = 0; i < images.size(); ++i) content.push_back({{"type", "image_url"}});
    content.push_back({{"type", "text"}, {"text", *p}});
    messages.push_back({{"role", "user"}, {"content", images.empty() ? nlohmann::json(*p) : content}});
    for (int32_t id : text::encode_chat(*tok, messages, nlohmann::json::array(), text::chat_options_for(tok->vocab())))
      prompt.push_back(id);
    if (!images.empty()) {
      std::vector<int> counts;
      for (const auto& img : images) counts.push_back(int(img->span.count));
      const auto spans = expand_image_placeholders(prompt, image_token_ids(m, &tok->vocab()), counts);
      for (size_t i = 0; i < images.size(); ++i) images[i]->span = spans[i];
    }
  } else {
    text::EncodeOptions eo;
    eo.add_bos = true;
    for (int32_t id : tok->encode(*p, eo)) prompt.push_back(id);
  }
  return prompt;
}

// Sampling, the model's stop tokens, the degeneracy guard and the output grammar.
void set_decoding(const Args& a, const Model& m, const std::optional<text::Tokenizer>& tok, GenerationRequest& req) {
  SamplingParams& sp = req.sampling;
  sp.max_tokens = int(a.get_int("-n", 64));
  sp.temperature = float(a.get_double("--temperature", 0.0));
  sp.seed = uint64_t(a.get_int("--seed", 0));
  sp.top_k = int(a.get_int("--top-k", 0));
  sp.top_p = float(a.get_double("--top-p", 1.0));
  sp.min_p = float(a.get_double("--min-p", 0.0));
  const text::StopTokens stops = model_stop_tokens(m, tok ? &tok->vocab() : nullptr);
  for (const auto& problem : stops.problems) std::fprintf(stderr, "warning: %s\n", problem.c_str());
  sp.stop_token_ids.assign(stops.ids.begin(), stops.ids.end());
  req.stop_on_degenerate = a.has("--stop-on-degenerate");
  if (wants_output_grammar(a)) {
    if (!tok) throw Error("--json-schema, --json-object and --grammar need a tokenizer");
    req.grammar = compile_output_grammar(a, *tok);
  }
}

// One sequence, the kernels --reference and --compute choose, the cache dtype --kv chooses.
ComputeChoice set_engine_options(const Args& a, const Model& m, int threads, EngineOptions& eo) {
  eo.max_seqs = 1;
  eo.prefill_chunk = a.get_int("--chunk", 256);
  eo.max_context = m.config.max_position_embeddings;
  eo.threads = a.has("--reference") ? 0 : threads;
  const ComputeChoice compute = resolve_compute(a, m);
  eo.kv.dtype = resolve_kv(a, compute, a.has("--reference"));
  eo.bf16_compute = !a.has("--reference") && compute.bf16;
  eo.int8_activations = !a.has("--reference") && compute.int8;
  const SpeculativeSetup spec = speculative_setup(a, m);
  eo.speculative = spec.options;
  eo.min_matmul_input = spec.min_matmul_input;
  return compute;
}

// The fast kernels' interleaved layouts, then --weights' probe on the products the engine will run.
void prepare_kernels(const ComputeChoice& compute, const EngineOptions& eo, std::optional<WeightsAtLoad>& requant,
                     Model& m, int threads) {
  // On AVX2 CPUs the f32 products read BF16_R16 too (ops/matmul/gemm_bf16_256.h), not the reference loops.
  const bool bf16_on_fma = eo.threads > 0 && ops::uses_bf16_256_kernel(ops::MatmulContext{});
  const bool fast_kernels = eo.int8_activations || eo.bf16_compute || bf16_on_fma;
  if (!fast_kernels && !requant) return;
  ThreadPool pool(threads);
  if (fast_kernels) {  // they read their interleaved layouts
    const std::string line = describe_interleave(prepare_weights(compute, m, &pool));
    if (!line.empty()) std::fprintf(stderr, "[g4] weights: %s\n", line.c_str());
  }
  if (requant) {
    const ops::MatmulContext mm = ops::make_matmul_context(&pool, host_cpu(), m.config.widest_matmul_input(),
                                                           eo.bf16_compute, eo.int8_activations);
    blocks::Exec ex;
    if (eo.threads > 0) ex.matmul = &mm;
    finish_weights_at_load(*requant, m, pool, ex, "[g4]");
  }
}

// Prints the text as it streams (token ids without a tokenizer); returns the final event.
GenerationEvent generate(Engine& engine, const GenerationRequest& req, bool has_tokenizer) {
  GenerationEvent last;
  engine.submit(req, [&](const GenerationEvent& e) {
    if (has_tokenizer) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    } else {
      for (const auto& t : e.tokens) std::printf("%d ", t.token);
    }
    std::fflush(stdout);
    if (e.finished) last = e;
  });
  engine.run_until_idle();
  std::printf("\n");
  return last;
}

void print_summary(const GenerationEvent& last) {
  const double prefill_tps = last.prefill_seconds > 0 ? double(last.prompt_tokens) / last.prefill_seconds : 0;
  const double decode_tps =
      last.decode_seconds > 0 && last.generated_tokens > 1 ? double(last.generated_tokens - 1) / last.decode_seconds : 0;
  nlohmann::json verdict = last.verdict;
  std::fprintf(stderr,
               "[g4] prompt %lld tokens, generated %lld tokens; prefill %.1f tok/s, decode %.1f tok/s, ttft %.3f s; "
               "finish %s%s; degeneracy %s\n",
               (long long)last.prompt_tokens, (long long)last.generated_tokens, prefill_tps, decode_tps,
               last.ttft_seconds, last.finish_reason.c_str(), last.stopped_degenerate ? " (loop certain, stopped early)" : "",
               verdict.dump().c_str());
  if (last.spec.verify_steps > 0)
    std::fprintf(stderr, "[g4] speculative: %s\n", speculation_json(last.spec).dump().c_str());
  if (last.grammar_masks > 0)
    std::fprintf(stderr, "[g4] grammar: %lld masks, %.3f ms per token (decode step %.2f ms)\n", (long long)last.grammar_masks,
                 1e3 * last.grammar_seconds / double(last.grammar_masks),
                 decode_tps > 0 ? 1e3 / decode_tps : 0.0);
}

int run(const std::vector<std::string>& argv) {
  Args a(argv,
         with_speculative_flags({"--model", "--prompt", "--tokens", "-n", "--temperature", "--seed", "--top-k", "--top-p",
                                 "--min-p", "--tokenizer", "--kv", "--chunk", "--system", "--threads", "--weights",
                                 "--weight-memory", "--compute", "--json-schema", "--grammar", "--image", "--image-tokens",
                                 "--mmproj", "--device"}),
         {"--chat", "--stop-on-degenerate", "--reference", "--json-object"});
  if (a.has("--prompt") == a.has("--tokens")) throw Error("give exactly one of --prompt or --tokens");
  const std::filesystem::path dir = model_arg(a.require("--model")).path;
  auto model = load_model(dir);
  const int threads = int(a.get_int("--threads", int(std::max(1u, std::thread::hardware_concurrency()))));
  if (threads < 1) throw Error("--threads must be >= 1");
  std::optional<WeightsAtLoad> requant = load_weights(a, *model, threads);
  const std::optional<text::Tokenizer> tok = load_tokenizer(a, *model);

  std::unique_ptr<VisionModel> vision;
  std::vector<std::shared_ptr<PromptImage>> images;
  if (a.has("--image")) {
    vision = load_vision_for(a, dir, *model);
    if (!vision) throw Error("--image: " + dir.string() + " has no vision tower (no vision_config; for a GGUF pass --mmproj)");
    images = read_image_files(a, vision->config);
  } else {
    for (const char* f : {"--image-tokens", "--mmproj"})
      if (a.has(f)) throw Error(std::string(f) + " needs --image");
  }
  GenerationRequest req;
  req.prompt = prompt_tokens(a, dir, tok, *model, images);
  req.images.assign(images.begin(), images.end());
  set_decoding(a, *model, tok, req);
  EngineOptions eo;
  const ComputeChoice compute = set_engine_options(a, *model, threads, eo);
  eo.vision = vision.get();
  const int64_t max_tokens = req.sampling.max_tokens;
  // The device holds this one request's positions (drafts may run k_max + 1 past the last token).
  const DeviceRun device = attach_device(a, *model, eo, vision ? "images run on the CPU only" : "",
                                         int64_t(req.prompt.size()) + max_tokens + eo.speculative.k_max + 2);
  std::fprintf(stderr, "[g4] %s\n", device.line.c_str());
  if (!device.forward) prepare_kernels(compute, eo, requant, *model, threads);
  prepare_vision_kernels(vision.get(), eo, "[g4]");
  eo.kv.max_total_tokens = (int64_t(req.prompt.size()) + max_tokens + eo.kv.block_tokens) / eo.kv.block_tokens * eo.kv.block_tokens;
  TextStreamFactory text_factory;
  if (tok) text_factory = [&] { return std::make_unique<DetokStream>(*tok); };
  Engine engine(*model, eo, text_factory);

  const GenerationEvent last = generate(engine, req, tok.has_value());
  print_summary(last);
  if (last.image_tokens > 0)
    std::fprintf(stderr, "[g4] images: %zu, %lld soft tokens, vision tower %.3f s\n", images.size(),
                 (long long)last.image_tokens, last.vision_seconds);
  if (last.finish_reason == "error") throw Error(last.error);
  return 0;
}

const Registration reg{"generate", "generate text from a prompt or token list (streams, then a summary)", kUsage, run};

}  // namespace
}  // namespace g4::cli
