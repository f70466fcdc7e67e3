// g4 logits: one forward pass over a token sequence, logits written as raw f32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "cli/args.h"
#include "cli/device_choice.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/compute_choice.h"
#include "cli/image_args.h"
#include "cli/logits_draft.h"
#include "cli/weights_at_load.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/model.h"
#include "platform/error.h"
#include "model/weight_placement.h"
#include "platform/atomic_file.h"
#include "platform/device.h"
#include "platform/thread_pool.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 logits --model MODEL --tokens 5,17,... [--out FILE] [--mode full|incremental|chunked]\n"
    "                 [--chunk N] [--kv f32|f16|bf16|int8] [--threads N [--compute f32|bf16] [--weights q8|q4]]\n"
    "                 [--image FILE ... [--image-tokens N] [--mmproj FILE]] [--device cpu|vulkan[:N]|auto]\n\n"
    "Runs the forward pass over the sequence (positions from 0, no BOS added) and prints the top-5\n"
    "of the last row. --mode full (default): the f32 reference over the whole sequence at once;\n"
    "incremental: one token at a time through the KV cache; chunked: --chunk tokens per step\n"
    "(default 64). All modes give the same logits (f32 KV) on the reference loops. --kv needs\n"
    "incremental or chunked, --chunk needs chunked (refused otherwise).\n\n"
    "  --model MODEL   a checkpoint directory, a .gguf file or a repo id (below)\n"
    "  --tokens LIST   comma-separated token ids\n"
    "  --out FILE      write float32 little-endian logits of shape [T, vocab]; row i = logits after token i\n"
    "  --threads N     incremental/chunked only: the SIMD kernels the engine runs, on N threads, with\n"
    "                  the device policy's compute and KV dtype (as g4 generate; --kv overrides)\n"
    "  --compute C     f32|bf16, as g4 generate (needs --threads); on --device vulkan[:N] f32 or f16\n"
    "                  (f16 products summed in f32, where the device reports shaderFloat16)\n"
    "  --weights W     q8|q4: re-encode the weight matrices at load, as g4 generate (needs --threads)\n\n"
    "With --image, LIST already holds each image's expanded span (<|image>, S x <|image|>, <image|>);\n"
    "the images fill the spans in order, and a span whose length is not its image's soft-token count\n"
    "is refused. The tower runs on the same path as the decoder (reference, or SIMD with --threads).\n"
    "On a Vulkan device (--device) the tokens run through the device's KV cache in the mode's steps\n"
    "(--mode full: all of them in one step); --threads, --weights, --kv (other than f32 or f16) and\n"
    "--image keep the run on the CPU (auto) or are refused (vulkan[:N]), as is a --compute the GPU\n"
    "policy refuses (with its reason).\n"
    "Draft mode (an assistant drafter, model_type gemma4_assistant, checked against MODEL at load):\n"
    "  g4 logits --model MODEL --draft-model PATH --tokens LIST --draft-at P[,P...] [--draft-k K] [--out FILE]\n"
    "For each start P (1 <= P < T): the target over tokens 0..P-1, then K draft steps (default 4) from\n"
    "token P and the target's final-normed hidden row P-1, all at position P. Prints each start's\n"
    "greedy draft tokens; --out writes float32 draft logits [starts, K, vocab]. Reference loops only.\n"
    "  --draft-model PATH the drafter: a directory (config.json + model.safetensors) or a\n"
    "                     gemma4-assistant .gguf (llama.cpp's converter layout)\n"
    "  --draft-at LIST    comma-separated starting positions\n"
    "  --draft-k K        draft steps per start (default 4)") +
    kImageHelp + kDeviceHelp + kModelHelp;

// The fast path's setup as g4 generate does it: weights re-encoded (--weights), placed and
// interleaved for the kernels the policy picks. `mm` must outlive the returned Exec.
blocks::Exec simd_exec(const Args& a, Model& m, ThreadPool& pool, std::optional<ops::MatmulContext>& mm,
                       KvDType& kv_dtype) {
  std::optional<WeightsAtLoad> requant = start_weights_at_load(a, m, pool, "[g4]");
  place_weights(m, WeightMemory::Auto, &pool);
  const ComputeChoice compute = resolve_compute(a, m);
  const std::string line = describe_interleave(prepare_weights(compute, m, &pool));
  if (!line.empty()) std::fprintf(stderr, "[g4] weights: %s\n", line.c_str());
  mm = ops::make_matmul_context(&pool, host_cpu(), m.config.widest_matmul_input(), compute.bf16, compute.int8);
  blocks::Exec ex;
  ex.matmul = &*mm;
  if (requant) finish_weights_at_load(*requant, m, pool, ex, "[g4]");
  kv_dtype = resolve_kv(a, compute, false);
  std::fprintf(stderr, "[g4] SIMD path: compute %s%s, KV %s\n", compute.bf16 ? "bf16" : "f32",
               compute.int8 ? " (int8 activations)" : "", kv_dtype_name(kv_dtype));
  return ex;
}

// --image: the images at the spans of `tokens`, in order, their soft tokens computed on `ex`.
EncodedImages logits_images(const Args& a, const std::filesystem::path& model_path, Model& m,
                            const std::vector<int>& tokens, const blocks::Exec& ex) {
  if (!a.has("--image")) {
    for (const char* f : {"--image-tokens", "--mmproj"})
      if (a.has(f)) throw Error(std::string(f) + " needs --image");
    return {};
  }
  const auto vision = load_vision_for(a, model_path, m);
  if (!vision) throw Error("--image: " + model_path.string() + " has no vision tower (no vision_config; for a GGUF pass --mmproj)");
  const auto images = read_image_files(a, vision->config);
  const auto spans = find_image_spans(tokens, image_token_ids(m, nullptr));
  if (spans.size() != images.size())
    throw Error("--tokens holds " + std::to_string(spans.size()) + " image span(s) and " + std::to_string(images.size()) +
                " --image file(s) were given");
  for (size_t i = 0; i < images.size(); ++i) {
    if (spans[i].count != images[i]->span.count)
      throw Error("image " + std::to_string(i) + " (" + a.get_all("--image")[i] + ") has " + std::to_string(images[i]->span.count) +
                  " soft tokens but its span at index " + std::to_string(spans[i].first) + " holds " +
                  std::to_string(spans[i].count));
    images[i]->span = spans[i];
  }
  return encode_images(*vision, images, ex);
}

// Refuses the flags --mode makes meaningless: --kv and --threads without a cache, --chunk outside
// chunked, --weights without the SIMD path, --compute without it or an explicit device.
void check_mode_flags(const Args& a, const std::string& mode) {
  if (mode != "full" && mode != "incremental" && mode != "chunked")
    throw Error("--mode '" + mode + "': expected full, incremental or chunked");
  // The whole-sequence reference has no cache and no chunks: those flags would do nothing there.
  if (mode == "full" && a.has("--kv")) throw Error("--kv: --mode full runs without a KV cache; use incremental or chunked");
  if (mode != "chunked" && a.has("--chunk")) throw Error("--chunk applies to --mode chunked only");
  const bool simd = a.has("--threads");
  if (simd && mode == "full") throw Error("--threads: the SIMD path runs through the KV cache; use --mode incremental or chunked");
  if (a.has("--weights") && !simd) throw Error("--weights needs --threads (the SIMD path)");
  // On an explicit device --compute is the GPU policy's request (f32, or f16 where it is native).
  if (a.has("--compute") && !simd && !names_vulkan(a))
    throw Error("--compute needs --threads (the SIMD path) or --device vulkan[:N] (the GPU policy)");
}

// The logits on the device --device chose: the tokens in steps of `chunk` (all of them for
// --mode full) through its KV cache. Null when the run stays on the CPU (the line says why).
std::optional<std::vector<float>> device_logits(const Args& a, const Model& m, const std::vector<int>& tokens,
                                                size_t chunk) {
  const DeviceChoice choice = resolve_device(a);
  if (!choice.vulkan) {
    std::fprintf(stderr, "device %s\n", choice.reason.c_str());
    return std::nullopt;
  }
  std::string why = cpu_only_flags(a);
  if (why.empty() && a.has("--threads")) why = "--threads picks the CPU's SIMD kernels";
  if (why.empty() && a.has("--image")) why = "images run on the CPU only";
  DeviceRun dev = open_device(choice, m, 1, uint32_t(tokens.size()), uint32_t(std::min(chunk, tokens.size())), why,
                              device_kv_f16(a), device_compute(a));
  std::fprintf(stderr, "%s\n", dev.line.c_str());
  if (!dev.forward) return std::nullopt;
  KvCacheOptions ko;
  ko.max_total_tokens = (int64_t(tokens.size()) + ko.block_tokens - 1) / ko.block_tokens * ko.block_tokens;
  KvCache kv(m.config, ko);
  dev.forward->attach(kv);
  const int seq = kv.add_sequence();
  std::vector<float> logits, l;
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    std::vector<BatchRow> rows;
    for (size_t t = start; t < std::min(tokens.size(), start + chunk); ++t) rows.push_back({seq, int64_t(t), tokens[t], true});
    dev.forward->forward(rows, kv, l, nullptr);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--model", "--tokens", "--out", "--mode", "--chunk", "--kv", "--threads", "--compute", "--weights",
                "--draft-model", "--draft-at", "--draft-k", "--image", "--image-tokens", "--mmproj", "--device"},
         {});
  if (a.has("--draft-model")) return run_logits_draft(a);
  for (const char* f : {"--draft-at", "--draft-k"})
    if (a.has(f)) throw Error(std::string(f) + " needs --draft-model");
  const std::string mode = a.get_or("--mode", "full");
  check_mode_flags(a, mode);
  const long long chunk = mode == "incremental" ? 1 : a.get_int("--chunk", 64);
  if (chunk < 1) throw Error("--chunk must be >= 1");
  const bool simd = a.has("--threads");
  const auto tokens = parse_int_list(a.require("--tokens"), "--tokens");
  auto t0 = std::chrono::steady_clock::now();
  const std::filesystem::path model_path = model_arg(a.require("--model")).path;
  auto model = load_model(model_path);
  std::optional<ThreadPool> pool;
  std::optional<ops::MatmulContext> mm;
  blocks::Exec ex;
  KvDType kv_dtype = kv_dtype_from_name(a.get_or("--kv", "f32"));
  if (simd) {
    const long long threads = a.get_int("--threads", 1);
    if (threads < 1) throw Error("--threads must be >= 1");
    pool.emplace(int(threads));
    ex = simd_exec(a, *model, *pool, mm, kv_dtype);
  }
  const auto t1 = std::chrono::steady_clock::now();
  const std::optional<std::vector<float>> on_device =
      device_logits(a, *model, tokens, mode == "full" ? tokens.size() : size_t(chunk));
  const EncodedImages images = on_device ? EncodedImages{} : logits_images(a, model_path, *model, tokens, ex);
  std::vector<float> logits;
  if (on_device) {
    logits = *on_device;
  } else if (mode == "full") {
    logits = forward_reference(*model, tokens, images.spans);
  } else {
    KvCacheOptions ko;
    ko.dtype = kv_dtype;
    ko.max_total_tokens = (int64_t(tokens.size()) + ko.block_tokens - 1) / ko.block_tokens * ko.block_tokens;
    KvCache kv(model->config, ko);
    const int seq = kv.add_sequence();
    for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
      std::vector<BatchRow> rows;
      for (size_t t = start; t < std::min(tokens.size(), start + size_t(chunk)); ++t) {
        rows.push_back({seq, int64_t(t), tokens[t], true});
        for (const SoftSpan& sp : images.spans)
          if (int64_t(t) >= sp.first_pos && int64_t(t) < sp.end_pos()) rows.back().soft = &sp;
      }
      const auto l = forward_cached(*model, rows, kv, ex);
      logits.insert(logits.end(), l.begin(), l.end());
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  const int64_t V = model->config.vocab_size, T = int64_t(tokens.size());
  if (auto out = a.get("--out")) {
    write_file_atomically(*out, std::string_view(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float)));
    std::fprintf(stderr, "wrote %s: [%lld, %lld] float32\n", out->c_str(), (long long)T, (long long)V);
  }
  const float* last = logits.data() + (T - 1) * V;
  std::vector<int> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = int(std::min<int64_t>(5, V));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int x, int y) { return last[x] > last[y]; });
  std::printf("top-%d after token %lld (position %lld):\n", k, (long long)tokens.back(), (long long)(T - 1));
  for (int i = 0; i < k; ++i) std::printf("  %8d  %10.5f\n", idx[size_t(i)], last[idx[size_t(i)]]);
  std::fprintf(stderr, "load %.3f s, forward %.3f s (%lld tokens, %s)\n",
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
               (long long)T,
               on_device ? "on the Vulkan device"
               : mode == "full" ? "f32 reference, whole sequence"
               : simd ? "SIMD kernels through the KV cache" : "through the KV cache");
  return 0;
}

const Registration reg{"logits", "forward pass over a token list, write logits [T, vocab] as f32 (or a drafter's, --draft-model)", kUsage, run};

}  // namespace
}  // namespace g4::cli
