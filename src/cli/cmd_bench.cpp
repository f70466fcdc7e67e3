// g4 bench: cold load, cold and warm prefill, decode at depth 0 and at depth, time to first
// token, peak RSS, weight bytes per decoded token, and the memory-read bandwidth measured in the
// same run, so decode can be stated as a fraction of this machine's roofline. The phases, in the
// order they run: the rig (bench_rig.h), the prefills and decodes (bench_runs.h), the runs the
// flags add (bench_optional_runs.h), then the table and the JSON (bench_report.h).
#include <cstdio>

#include "cli/args.h"
#include "cli/bench_device.h"
#include "cli/device_choice.h"
#include "cli/bench_optional_runs.h"
#include "cli/bench_report.h"
#include "cli/bench_rig.h"
#include "cli/bench_runs.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/output_grammar.h"
#include "cli/speculative_args.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 bench --model MODEL [--prompt-len 512] [--gen 128] [--depth 4096] [--threads N]\n"
    "                [--repeat 5] [--kv f32|f16|bf16|int8] [--weights q8|q4] [--weight-memory auto|huge|mapped]\n"
    "                [--compute f32|bf16] [--reference] [--json FILE] [--device cpu|vulkan[:N]|auto]\n"
    "                [--json-schema FILE | --json-object | --grammar FILE] [--streams LIST] [--chat-turns N]\n"
    "                [--speculative ngram|draft] [--draft-k N] [--draft-model PATH] [--draft-p-min P]\n"
    "                [--image FILE ... | --image-size WxH] [--image-tokens N] [--mmproj FILE]\n\n"
    "Measures, in one run: cold load time; cold and warm prefill tok/s (--prompt-len tokens);\n"
    "time to first token; decode tok/s at depth 0 and at --depth, the runs alternating (the cache\n"
    "is filled with synthetic K/V to that length: attention cost depends on length, not content),\n"
    "each median printed with its runs' range, and each depth run against the depth-0 run before it;\n"
    "peak RSS (sampled where the bench holds no buffer of its own; the process's high-water mark\n"
    "beside it); weight bytes read per decoded token; the memory-read bandwidth (best pass of one\n"
    "stream, eight streams and prefetching streams per thread, measured before, after and before\n"
    "each depth-0 decode run; the best of all of them is the ceiling); decode as a fraction of the\n"
    "roofline (bandwidth / bytes per token), also run by run against the bandwidth measured just\n"
    "before each run; decode against a read pass over the bytes a token streams, read as decode\n"
    "reads them (before each depth-0 run; at --depth, the weights and the K/V a token attends over,\n"
    "each owning layer's once, before each depth run), the median of the paired runs; then --gen\n"
    "tokens at depth 0 and at --depth each right after a read pass of what it reads (paired steps:\n"
    "the median, quartiles and extremes of pass / token time); where a\n"
    "decoded token's and a warm prefill's time goes (weight products, attention and the rest,\n"
    "timed on the calling thread, the pool's waits included; the products alone against the peak\n"
    "below); the FMA throughput of 1 thread and of --threads together (whether the threads add compute or share one core's units, which\n"
    "bounds prefill); and the warm prefill's weight products as a fraction of the peak of the\n"
    "instruction they issue (TDPBF16PS, TDPBSUD, VDPBF16PS, VPDPBUSD or f32 FMA), measured on\n"
    "--threads before and after the prefills (the higher counts).\n"
    "Progress on stderr, a table on stdout.\n"
    "--weights q8|q4 re-encodes the weight matrices in memory at load: the time, and how far the logits\n"
    "moved (an 8-token probe run before on the checkpoint's weights with f32 compute and after on the\n"
    "run's own path: max and mean |delta|, rms ratio, KL divergence, top-1 agreement) are reported.\n"
    "--weight-memory: where the streamed matrices live (default auto: copied into 2 MiB huge pages\n"
    "when THP is on and they fit in MemAvailable; mapped: read through the checkpoint's mapping).\n"
    "--compute f32|bf16: compute dtype (default: the device policy, see `g4 info`; f32 also keeps\n"
    "activations f32 for q8/q4 weights, which otherwise use int8 products where AVX512_VNNI is confirmed;\n"
    "there the Q8_0/Q4_0/Q4_K/Q5_K/Q6_K matrices in g4's memory are interleaved 16 rows at a time for the kernel).\n"
    "--kv: KV cache storage (default: the dtype policy's, see `g4 info`; f32 with --reference); with\n"
    "compute bf16 a bf16 cache is attended on VDPBF16PS, with int8 activations an int8 cache on\n"
    "VPDPBUSD, other caches widened to f32 (the table's \"attention\" line says which).\n"
    "--reference runs the f32 reference loops instead of the SIMD kernels.\n"
    "--json-schema FILE | --json-object | --grammar FILE (needs the model's tokenizer) also decodes --gen\n"
    "tokens under that grammar at temperature 1 and reports its token masks' time per token against\n"
    "the decode step beside them: cold (the first sentence, on a freshly compiled grammar) and warm\n"
    "(later sentences, its contexts cached).\n"
    "--streams LIST (e.g. 1,2,4,8) also runs the engine with that many requests decoding together\n"
    "(continuous batching: one weight read per step for all of them; 64-token prompts, --gen tokens\n"
    "each), every count once per round, --repeat rounds: aggregate and per-stream tok/s (the median\n"
    "of the rounds, with their range), inter-token latency, the gain over 1 stream taken within\n"
    "each round (with 1 in the list), its median and range, and a decode step's time split into\n"
    "weight products, attention and the rest.\n"
    "--chat-turns N also plays an N-turn chat through the engine (a --prompt-len opening, 32-token\n"
    "messages, 16-token answers, everything resent each turn), with the prefix cache and without:\n"
    "time to first token per turn and the prompt tokens the cache restored.\n"
    "--speculative ngram|draft (--draft-k N, default 4; draft: --draft-model PATH) also times one\n"
    "sequence's verify step of 1 + k rows (k = 0..8) at min(--prompt-len, 512) tokens of context,\n"
    "then decodes --gen greedy tokens of a\n"
    "copy-heavy prompt (a 48-token passage three times) through the engine, --repeat rounds of: plain,\n"
    "the mode, a replay drafter proposing plain decoding's own tokens (every draft accepted: the\n"
    "ceiling of the machinery, not of any drafter) and a random drafter (nothing accepted: the cost\n"
    "when speculation never pays): tok/s, each against plain in the same round, tokens per verify step\n"
    "and acceptance per draft position.\n"
    "--image FILE (repeatable) and --image-size WxH (a synthetic image, deterministic pixels) also\n"
    "time the vision tower (the checkpoint's, or --mmproj FILE's) on each image at --image-tokens\n"
    "(default: the tower's budget, 280): decode and preprocess time, patches, soft tokens, the tower\n"
    "and projector over --repeat runs (median and range), patches/s, the encoder's time in weight\n"
    "products, attention and the rest, the products' GFLOP/s against the peak of the instruction\n"
    "they issue (measured in the same run), and the engine's time to first token on a one-image\n"
    "chat (the image and 8 text tokens, one token generated, cold prefix cache).\n"
    "--json FILE also writes the figures with the device, the dtype policy, the kernels, the decode\n"
    "streaming plan and the prefill panel rows as one JSON object.\n"
    "On a Vulkan device (--device) the run is load, cold and warm prefill, decode at depth 0 and at\n"
    "--depth, each with the device's busy share by timestamp queries; the CPU-only runs are refused.\n") +
    kDeviceHelp + kModelHelp;

int run(const std::vector<std::string>& argv) {
  Args a(argv,
         with_speculative_flags({"--model", "--prompt-len", "--gen", "--depth", "--threads", "--repeat", "--json", "--kv",
                                 "--weights", "--weight-memory", "--compute", "--json-schema", "--grammar", "--streams",
                                 "--chat-turns", "--image", "--image-size", "--image-tokens", "--mmproj", "--device"}),
         {"--reference", "--json-object"});
  const BenchFlags flags = parse_bench_flags(a);
  const DeviceChoice choice = resolve_device(a);
  if (choice.vulkan) {  // the device run, unless auto fell back to the CPU (said on stderr)
    if (choice.explicit_choice) check_device_bench_flags(a);  // before any weight is uploaded
    const auto t0 = BenchClock::now();
    const auto model = load_model(model_arg(a.require("--model")).path);
    const double load_s = seconds_since(t0);
    const std::string why_not = cpu_only_flags(a);
    DeviceRun run = open_device(choice, *model, 1, uint32_t(flags.prompt_len + flags.depth + flags.gen + 1),
                                uint32_t(std::max<int64_t>(flags.prompt_len, 1)), why_not, device_kv_f16(a),
                                device_compute(a));
    if (run.forward) {
      check_device_bench_flags(a);  // auto: the CPU-only runs were asked of a CPU bench
      return run_device_bench(flags, *model, load_s, *run.forward, run.line);
    }
    std::fprintf(stderr, "[bench] %s\n", run.line.c_str());
  }
  const bool grammar_run = wants_output_grammar(a);
  BenchRig rig;
  set_up_bench(a, flags, rig);
  BenchResults res;
  res.prefill = run_prefills(rig, res.rss);
  res.decode = run_decodes(rig, res.rss);
  res.optional = run_optional(a, grammar_run, rig);
  const BenchFigures fig = derive_figures(rig, res);
  print_bench_table(rig, res, fig);
  // The table is whole on stdout before anything more reaches stderr: where both go to one pipe
  // (2>&1), a buffer flushed later would cut a table line at a 4 KiB boundary.
  std::fflush(stdout);
  if (auto jf = a.get("--json")) write_bench_json(*jf, a.get_or("--weights", ""), rig, res, fig);
  return 0;
}

const Registration reg{"bench", "measure load, prefill, decode, TTFT and RSS against the machine's bandwidth and compute peaks", kUsage, run};

}  // namespace
}  // namespace g4::cli
