// g4 bench: cold load, cold and warm prefill, decode at depth 0 and at depth, time to first
// token, peak RSS, weight bytes per decoded token, and the memory-read bandwidth measured in the
// same run, so decode can be stated as a fraction of this machine's roofline.
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "cli/args.h"
#include "cli/bench_engine.h"
#include "cli/bench_grammar.h"
#include "cli/command.h"
#include "cli/compute_choice.h"
#include "cli/output_grammar.h"
#include "cli/weights_at_load.h"
#include "engine/kv_cache.h"
#include "engine/model_text.h"
#include "model/forward_cached.h"
#include "model/model.h"
#include "model/weight_placement.h"
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/matmul/dot_kernels.h"
#include "ops/matmul/matmul.h"
#include "ops/rows/row_reductions.h"
#include "platform/bandwidth.h"
#include "platform/fma_throughput.h"
#include "platform/device.h"
#include "platform/dtype_policy.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

namespace g4::cli {
namespace {

const char* kUsage =
    "usage: g4 bench --model DIR [--prompt-len 512] [--gen 128] [--depth 4096] [--threads N]\n"
    "                [--repeat 5] [--kv f32|f16|bf16|int8] [--weights q8|q4] [--weight-memory auto|huge|mapped]\n"
    "                [--compute f32|bf16] [--reference] [--json FILE]\n"
    "                [--json-schema FILE | --json-object | --grammar FILE] [--streams LIST] [--chat-turns N]\n\n"
    "Measures, in one run: cold load time; cold and warm prefill tok/s (--prompt-len tokens);\n"
    "time to first token; decode tok/s at depth 0 and at --depth, the runs alternating (the cache\n"
    "is filled with synthetic K/V to that length: attention cost depends on length, not content),\n"
    "each median printed with its runs' range, and each depth run against the depth-0 run before it;\n"
    "peak RSS (sampled where the bench holds no buffer of its own; the process's high-water mark\n"
    "beside it); weight bytes read per decoded token; the memory-read bandwidth (best pass of one\n"
    "stream, eight streams and prefetching streams per thread, measured before, after and before\n"
    "each depth-0 decode run; the best of all of them is the ceiling); decode as a fraction of the\n"
    "roofline (bandwidth / bytes per token), also run by run against the bandwidth measured just\n"
    "before each run; where a decoded token's and a warm prefill's time goes (weight products,\n"
    "attention and the rest, timed on the calling thread, the pool's waits included; the products\n"
    "alone against the peak below); the FMA throughput of 1 thread\n"
    "and of --threads together (whether the threads add compute or share one core's units, which\n"
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
    "(continuous batching: one weight read per step for all of them; --prompt-len 64-token prompts,\n"
    "--gen tokens each): aggregate and per-stream tok/s, inter-token latency, the gain over 1 stream.\n"
    "--chat-turns N also plays an N-turn chat through the engine (a --prompt-len opening, 32-token\n"
    "messages, 16-token answers, everything resent each turn), with the prefix cache and without:\n"
    "time to first token per turn and the prompt tokens the cache restored.\n"
    "--json FILE also writes the figures with the device, the dtype policy, the kernels, the decode\n"
    "streaming plan and the prefill panel rows as one JSON object.";

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// "lo-hi" of a set of runs: on a shared machine the spread a median hides is part of the figure.
std::string run_range(const std::vector<double>& v, int digits) {
  if (v.empty()) return "";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f-%.*f", digits, *lo, digits, *hi);
  return buf;
}

// The process's resident high-water mark: it also counts what only the bench holds (the 1 GiB
// bandwidth buffer, measured while the model is loaded) and what the load held for a moment.
uint64_t rss_high_water_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return uint64_t(ru.ru_maxrss) * 1024;
}

// Resident bytes now (/proc/self/statm), 0 when unreadable.
uint64_t rss_now_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

// Bytes of weights one decoded token reads: every matrix once, the tied head in full, one row of
// each embedding table (a gather), and only the top-k experts' share of the expert tensors.
uint64_t weight_bytes_per_token(const Model& m) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  uint64_t b = w.bound_bytes;
  b -= w.embed_tokens->nbytes;
  b += w.embed_tokens->nbytes / uint64_t(c.vocab_size);  // the input row
  if (w.lm_head == w.embed_tokens) b += w.lm_head->nbytes;  // the tied head reads all of it
  if (w.embed_per_layer) b -= w.embed_per_layer->nbytes - w.embed_per_layer->nbytes / uint64_t(c.vocab_size_per_layer_input);
  for (const LayerWeights& lw : w.layers)
    if (lw.experts_gate_up) {
      const uint64_t e = lw.experts_gate_up->nbytes + lw.experts_down->nbytes;
      b -= e - e / uint64_t(c.num_experts) * uint64_t(c.top_k_experts);
    }
  return b;
}

// Multiply-adds of the weight products per prompt token in a prefill of prompt_len tokens:
// every streamed matrix once (the top-k experts' share of the expert tensors), the head once per
// prompt (only the last token's logits are computed). Attention is not counted.
double prefill_macs_per_token(Model& m, int64_t prompt_len) {
  const ModelConfig& c = m.config;
  ModelWeights& w = m.weights;
  double macs = 0;
  for (const TensorView** t : streamed_matrices(w)) {
    double n = 1;
    for (int64_t d : (*t)->shape) n *= double(d);
    if (*t == w.lm_head) n /= double(prompt_len);
    const LayerWeights* owner = nullptr;
    for (const LayerWeights& lw : w.layers)
      if (*t == lw.experts_gate_up || *t == lw.experts_down) owner = &lw;
    if (owner) n *= double(c.top_k_experts) / double(c.num_experts);
    macs += n;
  }
  return macs;
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--model", "--prompt-len", "--gen", "--depth", "--threads", "--repeat", "--json", "--kv", "--weights", "--weight-memory", "--compute",
                            "--json-schema", "--grammar", "--streams", "--chat-turns"},
         {"--reference", "--json-object"});
  const int64_t prompt_len = a.get_int("--prompt-len", 512), gen = a.get_int("--gen", 128),
                depth = a.get_int("--depth", 4096), repeat = a.get_int("--repeat", 5);
  const int threads = int(a.get_int("--threads", int(std::max(1u, std::thread::hardware_concurrency()))));
  if (prompt_len < 1 || gen < 2 || depth < 0 || repeat < 1 || threads < 1)
    throw Error("bench: --prompt-len >= 1, --gen >= 2, --depth >= 0, --repeat >= 1, --threads >= 1");
  const bool reference = a.has("--reference");

  const bool grammar_run = wants_output_grammar(a);
  auto t0 = Clock::now();
  auto model = load_model(a.require("--model"));
  const double load_s = since(t0);
  const ModelConfig& c = model->config;
  std::fprintf(stderr, "[bench] loaded %s in %.2f s\n", model->path.string().c_str(), load_s);

  ThreadPool pool(threads);
  std::optional<WeightsAtLoad> requant = start_weights_at_load(a, *model, pool, "[bench]");
  const PlacementReport placed =
      place_weights(*model, weight_memory_from_flag(a.get_or("--weight-memory", "auto")), &pool);
  std::fprintf(stderr, "[bench] weights: %s\n", describe_placement(placed).c_str());
  const ComputeChoice compute = resolve_compute(a, *model);
  const InterleaveReport interleaved = reference ? InterleaveReport{} : prepare_weights(compute, *model, &pool);
  if (!describe_interleave(interleaved).empty())
    std::fprintf(stderr, "[bench] weights: %s\n", describe_interleave(interleaved).c_str());
  BandwidthOptions bo;
  bo.threads = threads;
  bo.buffer_bytes = uint64_t(1) << 30;  // 1 GiB: past any L3 a VM reports, so it is DRAM we time
  bo.repetitions = 5;
  std::fprintf(stderr, "[bench] measuring memory-read bandwidth with %d threads (again after decode) ...\n", threads);
  const BandwidthResult bw_before = measure_read_bandwidth(bo);
  std::fprintf(stderr, "[bench] measuring FMA throughput on 1 and %d threads ...\n", threads);
  const FmaScaling fma = measure_fma_scaling(threads);
  ops::MatmulContext mm = ops::make_matmul_context(&pool, host_cpu(), c.widest_matmul_input(), compute.bf16, compute.int8);
  blocks::Exec ex;
  if (!reference) ex.matmul = &mm;
  if (requant) finish_weights_at_load(*requant, *model, pool, ex, "[bench]");
  // The peak of the instruction the prefill products issue (the FMA loop's when that is f32 FMA).
  const MacUnit unit = reference ? MacUnit::F32Fma : ops::mac_unit_of(mm, model->weights.layers[0].q_proj->dtype);
  MacPeak peak{unit, threads, fma.all_threads_gflops};
  if (unit != MacUnit::F32Fma) {
    std::fprintf(stderr, "[bench] measuring the %s peak on %d threads ...\n", mac_unit_name(unit), threads);
    peak = measure_mac_peak(unit, threads);
  }

  KvCacheOptions ko;
  ko.dtype = resolve_kv(a, compute, reference);
  ko.max_total_tokens = (std::max(prompt_len, depth) + gen + 2 * ko.block_tokens) / ko.block_tokens * ko.block_tokens * 2;
  KvCache kv(c, ko);
  std::vector<int> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[size_t(i)] = int(4 + (i * 7919) % (c.vocab_size - 4));

  // Where a decoded token's (or a whole prefill's) time goes, one run: ms in total, in the weight
  // products, in attention, and the rest (norms, RoPE, activations, cache writes, sampling).
  struct TokenTimes {
    double total_ms, weight_products_ms, attention_ms;
    double rest_ms() const { return total_ms - weight_products_ms - attention_ms; }
  };
  auto prefill = [&](double* ttft, std::vector<TokenTimes>* times) {
    const int seq = kv.add_sequence();
    blocks::StepTimes st;
    blocks::Exec timed = ex;
    timed.times = &st;
    auto t = Clock::now();
    std::vector<BatchRow> rows;
    for (int64_t p = 0; p < prompt_len; ++p) rows.push_back({seq, p, prompt[size_t(p)], p + 1 == prompt_len});
    auto logits = forward_cached(*model, rows, kv, timed);
    (void)ops::argmax(logits.data(), int64_t(logits.size()));  // the first token is chosen here
    const double s = since(t);
    if (ttft) *ttft = s;
    if (times) times->push_back({s * 1e3, st.weight_products_s * 1e3, st.attention_s * 1e3});
    kv.free_sequence(seq);
    return s;
  };
  // Decode `gen` tokens with the cache already `start_depth` long; returns tok/s.
  auto decode = [&](int64_t start_depth, std::vector<TokenTimes>& times) {
    const int seq = kv.add_sequence();
    if (start_depth > 0) kv.fill_for_benchmark(seq, start_depth, 42);
    int tok = 5;
    std::vector<float> logits;  // kept across tokens, as the engine keeps it
    blocks::StepTimes st;
    blocks::Exec timed = ex;
    timed.times = &st;
    auto t = Clock::now();
    for (int64_t g = 0; g < gen; ++g) {
      forward_cached(*model, {{seq, kv.length(seq), tok, true}}, kv, timed, logits);
      tok = int(ops::argmax(logits.data(), int64_t(logits.size())));  // greedy, as the sampler
    }
    const double s = since(t);
    kv.free_sequence(seq);
    const double per = 1e3 / double(gen);
    times.push_back({s * per, st.weight_products_s * per, st.attention_s * per});
    return double(gen) / s;
  };

  std::fprintf(stderr, "[bench] cold prefill of %lld tokens ...\n", (long long)prompt_len);
  double ttft_cold = 0;
  // The engine's resident size, sampled where the bench holds no buffer of its own: after the
  // load, after each prefill and after each decode run.
  uint64_t engine_rss = rss_now_bytes();
  const double cold_prefill_s = prefill(&ttft_cold, nullptr);
  engine_rss = std::max(engine_rss, rss_now_bytes());
  std::vector<double> warm, ttfts;
  std::vector<TokenTimes> prefill_times;
  for (int64_t r = 0; r < repeat; ++r) {
    double tt = 0;
    warm.push_back(prefill(&tt, &prefill_times));
    engine_rss = std::max(engine_rss, rss_now_bytes());
    ttfts.push_back(tt);
    std::fprintf(stderr, "[bench] warm prefill %lld/%lld: %.1f tok/s\n", (long long)r + 1, (long long)repeat,
                 double(prompt_len) / warm.back());
  }
  // The peak again, right after the prefills it is held against: on a shared host a neighbour's
  // burst during one measurement lowered it by a fifth (a prefill then read 115-129% "of the
  // peak"), and the higher of the two is the conservative divisor, as with the bandwidth.
  std::fprintf(stderr, "[bench] measuring the %s peak on %d threads again ...\n", mac_unit_name(unit), threads);
  const double peak_before = peak.gops;
  const double peak_after = measure_mac_peak(unit, threads).gops;
  peak.gops = std::max(peak_before, peak_after);
  // Depth 0 and depth D alternate, run by run: on a shared machine the host's load drifts over
  // minutes, and alternating lets a drift move both medians alike instead of their ratio.
  // Each depth-0 run is also paired with a bandwidth pass just before it: the host's share of
  // DRAM bandwidth drifts between runs, and a run against the ceiling of its own moment says how
  // close the kernels come independently of that drift.
  std::vector<double> dec0, decd, bw_runs, pass_runs;
  std::vector<TokenTimes> times0, timesd;
  BandwidthOptions bo_run = bo;
  bo_run.repetitions = 3;  // one pass of each way to read
  // The read-pass roofline: the bytes a token streams, read the way decode reads them (the same
  // memory, pool, per-matrix hand-offs and streams per thread), nothing computed.
  const std::vector<ReadRange> reads = decode_weight_reads(model->weights, c);
  uint64_t pass_bytes = 0;
  // The best of at least 3 passes and 40 ms of them (a small model's pass is short and noisy),
  // alternating the plan's two stream counts: a ceiling, so the ratio errs low, never high.
  auto read_pass = [&] {
    double best = 1e30, spent = 0;
    for (int k = 0; k < 3 || spent < 0.04; ++k) {
      const int streams = std::max(1, k % 2 ? mm.decode.wide_groups : mm.decode.groups);
      const double s = time_read_pass(reads, pool, streams, mm.decode.prefetch_bytes, &pass_bytes);
      best = std::min(best, s);
      spent += s;
    }
    return best;
  };
  (void)read_pass();  // first touch of anything not yet read
  for (int64_t r = 0; r < repeat; ++r) {
    bw_runs.push_back(measure_read_bandwidth(bo_run).best_gb_per_s);
    pass_runs.push_back(read_pass());
    dec0.push_back(decode(0, times0));
    engine_rss = std::max(engine_rss, rss_now_bytes());
    std::fprintf(stderr, "[bench] decode at depth 0, run %lld: %.2f tok/s\n", (long long)r + 1, dec0.back());
    if (depth == 0) continue;
    decd.push_back(decode(depth, timesd));
    engine_rss = std::max(engine_rss, rss_now_bytes());
    std::fprintf(stderr, "[bench] decode at depth %lld, run %lld: %.2f tok/s\n", (long long)depth, (long long)r + 1, decd.back());
  }
  std::fprintf(stderr, "[bench] measuring memory-read bandwidth with %d threads ...\n", threads);
  // The best of the measurements before the run, before each depth-0 run and after: on a shared
  // machine a neighbour's burst lowers some of them, and the highest ceiling is the conservative
  // one to divide by.
  BandwidthResult bw = measure_read_bandwidth(bo);
  if (bw_before.best_gb_per_s > bw.best_gb_per_s) bw = bw_before;
  for (double b : bw_runs) bw.best_gb_per_s = std::max(bw.best_gb_per_s, b);

  std::optional<GrammarMaskCost> masks;
  if (grammar_run) {
    const std::optional<text::Tokenizer> tok = load_model_tokenizer(*model, std::nullopt);
    if (!tok) throw Error(model->path.string() + ": --json-schema, --json-object and --grammar need the model's tokenizer");
    const text::StopTokens stops = model_stop_tokens(*model, &tok->vocab());
    text::EncodeOptions with_bos;
    with_bos.add_bos = true;
    const auto bos = tok->encode("", with_bos);
    std::fprintf(stderr, "[bench] decoding %lld tokens under the grammar ...\n", (long long)gen);
    masks = measure_grammar_masks(*model, kv, ex, compile_output_grammar(a, *tok),
                                  std::vector<int>(stops.ids.begin(), stops.ids.end()), bos.empty() ? 0 : int(bos[0]), gen);
  }

  EngineOptions engine_options;  // the engine on the bench's model, as g4 serve would run it
  engine_options.threads = reference ? 0 : threads;
  engine_options.bf16_compute = !reference && compute.bf16;
  engine_options.int8_activations = !reference && compute.int8;
  engine_options.kv.dtype = ko.dtype;
  engine_options.max_context = c.max_position_embeddings;
  engine_options.kv.max_total_tokens = int64_t(1) << 18;
  std::vector<StreamsResult> streams;
  if (auto list = a.get("--streams")) {
    for (int n : parse_int_list(*list, "--streams")) {
      if (n < 1 || n > 256) throw Error("--streams: each count must be in 1..256, got " + std::to_string(n));
      std::fprintf(stderr, "[bench] %d stream(s) decoding %lld tokens each ...\n", n, (long long)gen);
      streams.push_back(bench_streams(*model, engine_options, n, 64, gen));
    }
  }
  std::vector<ChatTurn> turns_cached, turns_cold;
  if (auto t = a.get("--chat-turns")) {
    const int turns = int(a.get_int("--chat-turns", 10));
    if (turns < 2 || turns > 100) throw Error("--chat-turns must be in 2..100, got " + *t);
    EngineOptions with_cache = engine_options;
    with_cache.prefix_cache_bytes = uint64_t(1) << 30;
    std::fprintf(stderr, "[bench] a %d-turn chat with the prefix cache, then without ...\n", turns);
    turns_cached = bench_chat_turns(*model, with_cache, turns, prompt_len, 32, 16);
    turns_cold = bench_chat_turns(*model, engine_options, turns, prompt_len, 32, 16);
  }

  const uint64_t bytes_tok = weight_bytes_per_token(*model);
  const double roofline = bw.best_gb_per_s * 1e9 / double(bytes_tok);
  const double d0 = median(dec0), dd = decd.empty() ? 0 : median(decd);
  const double warm_tps = double(prompt_len) / median(warm);
  std::vector<double> warm_runs, depth_ratios;  // tok/s per warm prefill; depth / depth 0, run by run
  for (double w : warm) warm_runs.push_back(double(prompt_len) / w);
  for (size_t r = 0; r < decd.size(); ++r) depth_ratios.push_back(100.0 * decd[r] / dec0[r]);
  std::vector<double> roofline_ratios;  // depth-0 run / (bandwidth just before it / bytes), run by run
  for (size_t r = 0; r < dec0.size(); ++r) roofline_ratios.push_back(100.0 * dec0[r] * double(bytes_tok) / (bw_runs[r] * 1e9));
  // Each depth-0 run against the read pass just before it: tokens/s x pass seconds.
  std::vector<double> pass_ratios;
  for (size_t r = 0; r < dec0.size(); ++r) pass_ratios.push_back(100.0 * dec0[r] * pass_runs[r]);
  const double pass_ratio = median(pass_ratios);
  const DevicePolicy& policy = compute.policy;
  const std::string executed = reference ? std::string("f32 reference loops")
                                         : ops::describe_matmul(mm, model->weights.layers[0].q_proj->dtype);

  const std::string attention = describe_attention(kv_span_element(ko.dtype), ex);
  std::printf("g4 bench: %s (%s weights, %s KV), %d threads\n  %-34s %s\n  %-34s %s\n", model->path.string().c_str(),
              std::string(dtype_name(model->weights.layers[0].q_proj->dtype)).c_str(), kv_dtype_name(ko.dtype), threads,
              "weight products", executed.c_str(), "attention", attention.c_str());
  std::printf("  %-34s %10.2f s\n", "cold load (mmap + validate)", load_s);
  std::printf("  %-34s %10.2f s  (%s)\n", "weights into memory", placed.seconds, describe_placement(placed).c_str());
  if (requant) {
    std::printf("  %-34s %10.2f s  (--weights %s)\n", "quantize at load", requant->requantized.seconds, requant->flag.c_str());
    const LogitShift& sh = requant->shift;
    std::printf("  %-34s %10.3f  (%s; a probe of %lld tokens, the run's own products against the checkpoint's "
                "weights with f32 compute; both probes %.2f s)\n",
                "logits moved by --weights", sh.max_abs, describe_logit_shift(sh).c_str(), (long long)sh.rows,
                requant->probe_s);
  }
  if (interleaved.tensors)
    std::printf("  %-34s %10.2f s  (%s)\n", "interleave rows at load", interleaved.seconds, describe_interleave(interleaved).c_str());
  std::printf("  %-34s %10.1f tok/s  (%lld tokens, first touch of the weights)\n", "prefill, cold", double(prompt_len) / cold_prefill_s,
              (long long)prompt_len);
  std::printf("  %-34s %10.1f tok/s  (median of %lld; runs %s)\n", "prefill, warm", warm_tps, (long long)repeat,
              run_range(warm_runs, 1).c_str());
  const double prefill_macs = prefill_macs_per_token(*model, prompt_len);
  const double prefill_gops = warm_tps * 2 * prefill_macs / 1e9;
  std::printf("  %-34s %10.1f%%  (the weight products' multiply-adds at the warm median, %.0f GOP/s, against the %s peak "
              "on %d threads measured in this run, %.0f GOP/s, the higher of %.0f before and %.0f after the prefills; "
              "attention and the rest not counted)\n",
              "prefill products / compute peak", 100.0 * prefill_gops / peak.gops, prefill_gops, mac_unit_name(unit), threads,
              peak.gops, peak_before, peak_after);
  // The run whose total is the median (the lower of the middle two for an even count), so that its
  // parts add up to the figure printed.
  auto median_run = [](std::vector<TokenTimes> ts) {
    std::sort(ts.begin(), ts.end(), [](const TokenTimes& x, const TokenTimes& y) { return x.total_ms < y.total_ms; });
    return ts[(ts.size() - 1) / 2];
  };
  const TokenTimes prefill_median = median_run(prefill_times);
  // The products alone, timed on the calling thread from hand-off to result: what the kernels
  // reach, apart from attention and the row-wise steps between them.
  const double products_alone_gops = 2 * prefill_macs * double(prompt_len) / (prefill_median.weight_products_ms * 1e6);
  std::printf("  %-34s %10.1f ms  (the median run: weight products %.1f (alone %.0f GOP/s, %.1f%% of the peak), "
              "attention %.1f, the rest %.1f)\n",
              "prefill time, warm", prefill_median.total_ms, prefill_median.weight_products_ms, products_alone_gops,
              100.0 * products_alone_gops / peak.gops, prefill_median.attention_ms, prefill_median.rest_ms());
  std::printf("  %-34s %10.3f s cold, %.3f s warm\n", "time to first token", ttft_cold, median(ttfts));
  std::printf("  %-34s %10.2f tok/s  (%lld tokens, median of %lld; runs %s)\n", "decode, depth 0", d0, (long long)gen,
              (long long)repeat, run_range(dec0, 2).c_str());
  if (depth > 0)  // each depth run against the depth-0 run just before it, too
    std::printf("  %-34s %10.2f tok/s  (%.1f%% of depth 0; runs %s; run by run %s%%, median %.1f%%)\n",
                ("decode, depth " + std::to_string(depth)).c_str(), dd, 100.0 * dd / d0, run_range(decd, 2).c_str(),
                run_range(depth_ratios, 1).c_str(), median(depth_ratios));
  auto print_times = [&](const std::string& label, const std::vector<TokenTimes>& ts) {
    const TokenTimes m = median_run(ts);
    std::printf("  %-34s %10.2f ms  (the median run: weight products %.2f, attention %.2f, the rest %.2f)\n", label.c_str(),
                m.total_ms, m.weight_products_ms, m.attention_ms, m.rest_ms());
  };
  print_times("decode time per token, depth 0", times0);
  if (depth > 0) print_times("decode time per token, depth " + std::to_string(depth), timesd);
  std::printf("  %-34s %10.1f MiB\n", "weight bytes read per token", double(bytes_tok) / (1 << 20));
  std::printf("  %-34s %10.1f GB/s  (%d threads, %.0f MiB buffer, best of %zu measurements: before, during and after the run; "
              "before each depth-0 run %s)\n",
              "memory-read bandwidth", bw.best_gb_per_s, threads, double(bw.buffer_bytes) / (1 << 20), bw_runs.size() + 2,
              run_range(bw_runs, 1).c_str());
  std::printf("  %-34s %10.2f tok/s\n", "roofline (bandwidth / bytes)", roofline);
  std::printf("  %-34s %10.1f%%  (run by run, each depth-0 run against the bandwidth measured just before it: %s%%, "
              "median %.1f%%)\n",
              "decode / DRAM roofline", 100.0 * d0 / roofline, run_range(roofline_ratios, 1).c_str(), median(roofline_ratios));
  std::vector<double> pass_ms;
  for (double p : pass_runs) pass_ms.push_back(p * 1e3);
  std::printf("  %-34s %10.2f ms  (%.1f MiB: every streamed matrix, top-k experts, read as decode reads them, nothing "
              "computed; %.1f GB/s; best of >= 3 passes and 40 ms before each depth-0 run: %s ms)\n",
              "weight read pass", median(pass_ms), double(pass_bytes) / (1 << 20),
              double(pass_bytes) / (median(pass_runs) * 1e9), run_range(pass_ms, 2).c_str());
  std::printf("  %-34s %10.1f%%  (median of the depth-0 runs each against the read pass just before it; runs %s%%)%s\n",
              "decode / read-pass roofline", pass_ratio, run_range(pass_ratios, 1).c_str(),
              pass_ratio > 100.0 ? "; above 100%: decode beat the passes paired with it, so a neighbour on the host "
                                   "slowed those passes, or decode's products read ahead into caches the pass does not use"
                                 : "");
  if (masks) {
    const GrammarMaskCost& g = *masks;
    std::printf("  %-34s %10.1f%%  (%.3f ms/token over the first sentence, %lld tokens, on a fresh grammar: the matcher "
                "%.3f plus %.3f the mask adds to sampling (%.3f masked, %.3f plain); against the decode step beside "
                "them, %.2f ms; %lld contexts, their trie walks %.1f ms in all)\n",
                "grammar masks / decode step, cold", 100.0 * g.cold_ms() / g.step_ms, g.cold_ms(), (long long)g.cold_tokens,
                g.cold_matcher_ms, g.sample_extra_ms(), g.masked_sample_ms, g.plain_sample_ms, g.step_ms,
                (long long)g.contexts, g.context_walk_ms);
    if (g.warm_tokens > 0)
      std::printf("  %-34s %10.1f%%  (%.3f ms/token over %lld tokens after the first sentence, %d sentences in all)\n",
                  "grammar masks / decode step, warm", 100.0 * g.warm_ms() / g.step_ms, g.warm_ms(), (long long)g.warm_tokens,
                  g.sentences);
  }
  for (const StreamsResult& st : streams)
    std::printf("  %-34s %10.2f tok/s  (%.2f per stream, %.2fx 1 stream; inter-token median %.1f ms, p90 %.1f ms)\n",
                ("decode, " + std::to_string(st.streams) + " stream" + (st.streams > 1 ? "s" : "")).c_str(),
                st.aggregate_tok_s, st.per_stream_tok_s,
                streams.empty() || streams[0].streams != 1 ? 0.0 : st.aggregate_tok_s / streams[0].aggregate_tok_s,
                st.inter_token_ms_median, st.inter_token_ms_p90);
  if (!turns_cached.empty()) {
    const ChatTurn& first = turns_cached.front();
    const ChatTurn& last = turns_cached.back();
    int64_t restored = 0;
    for (const ChatTurn& t : turns_cached) restored += t.cached_tokens;
    std::printf("  %-34s %10.3f s  (turn 1, %lld prompt tokens: %.3f s; last turn / turn 1 = %.2fx; its %lld prompt "
                "tokens, %lld restored from the prefix cache; %lld restored over all turns; without the cache the "
                "last turn: %.3f s)\n",
                ("time to first token, chat turn " + std::to_string(turns_cached.size())).c_str(), last.ttft_s,
                (long long)first.prompt_tokens, first.ttft_s, last.ttft_s / first.ttft_s, (long long)last.prompt_tokens,
                (long long)last.cached_tokens, (long long)restored, turns_cold.back().ttft_s);
  }
  std::printf("  %-34s %10.1f GFLOP/s  (%s)\n", "FMA throughput, all threads", fma.all_threads_gflops,
              describe_fma_scaling(fma).c_str());
  std::printf("  %-34s %10.1f MiB  (the engine: the most sampled after the load, each prefill and each decode run; the "
              "process's high-water mark, with the bench's own 1 GiB bandwidth buffer, %.1f MiB)\n",
              "peak RSS", double(engine_rss) / (1 << 20), double(rss_high_water_bytes()) / (1 << 20));

  if (auto jf = a.get("--json")) {
    auto times_json = [](const std::vector<TokenTimes>& ts) {
      nlohmann::json runs = nlohmann::json::array();
      for (const TokenTimes& t : ts)
        runs.push_back({{"total", t.total_ms}, {"weight_products", t.weight_products_ms}, {"attention", t.attention_ms},
                        {"rest", t.rest_ms()}});
      return runs;
    };
    nlohmann::json j = {
        {"model", model->path.string()},
        {"weights_dtype", std::string(dtype_name(model->weights.dtype))},
        {"kv_dtype", kv_dtype_name(ko.dtype)},
        {"threads", threads},
        {"kernels", reference ? "reference" : ops::dot_kernel_target()},
        {"weight_products", executed},
        {"amx_bf16_kernel_check",
         {{"run", ops::amx_bf16_kernel_check().run}, {"passed", ops::amx_bf16_kernel_check().passed},
          {"detail", ops::amx_bf16_kernel_check().detail}}},
        {"amx_int8_kernel_check",
         {{"run", ops::amx_int8_kernel_check().run}, {"passed", ops::amx_int8_kernel_check().passed},
          {"detail", ops::amx_int8_kernel_check().detail}}},
        {"amx_attention_kernel_check",
         {{"run", ops::amx_attention_kernel_check().run}, {"passed", ops::amx_attention_kernel_check().passed},
          {"detail", ops::amx_attention_kernel_check().detail}}},
        {"attention", attention},
        {"prompt_len", prompt_len},
        {"gen", gen},
        {"depth", depth},
        {"repeat", repeat},
        {"cold_load_s", load_s},
        {"weights_requantized", a.get_or("--weights", "")},
        {"requantize_s", requant ? requant->requantized.seconds : 0.0},
        {"requantize_logits", requant ? nlohmann::json{{"probe_tokens", requant->shift.rows},
                                                       {"after_path", requant->after_path},
                                                       {"max_abs", requant->shift.max_abs},
                                                       {"mean_abs", requant->shift.mean_abs},
                                                       {"rms_ratio", requant->shift.rms_ratio},
                                                       {"mean_kl_nats", requant->shift.mean_kl},
                                                       {"max_kl_nats", requant->shift.max_kl},
                                                       {"top1_same", requant->shift.top1_same},
                                                       {"probe_s", requant->probe_s}}
                                      : nlohmann::json(nullptr)},
        {"interleave", {{"matrices", interleaved.tensors}, {"bytes", interleaved.bytes}, {"seconds", interleaved.seconds},
                        {"left_row_major_mapped", interleaved.left_mapped}}},
        {"weight_memory", {{"placement", placed.placement}, {"reason", placed.reason}, {"bytes", placed.bytes},
                           {"huge_page_bytes", placed.huge_bytes}, {"seconds", placed.seconds}}},
        {"prefill_cold_tok_s", double(prompt_len) / cold_prefill_s},
        {"prefill_warm_tok_s", warm_tps},
        {"ttft_cold_s", ttft_cold},
        {"ttft_warm_s", median(ttfts)},
        {"decode_depth0_tok_s", d0},
        {"decode_depth_tok_s", dd},
        {"decode_runs_depth0", dec0},
        {"decode_runs_depth", decd},
        {"decode_depth_percent_run_by_run", depth_ratios},
        {"decode_ms_per_token_depth0", times_json(times0)},
        {"decode_ms_per_token_depth", times_json(timesd)},
        {"prefill_warm_runs_tok_s", warm_runs},
        {"prefill_ms_warm", times_json(prefill_times)},
        {"weight_bytes_per_token", bytes_tok},
        {"bandwidth_gb_s", bw.best_gb_per_s},
        {"roofline_tok_s", roofline},
        {"decode_fraction_of_roofline", d0 / roofline},
        {"bandwidth_runs_gb_s", bw_runs},
        {"decode_roofline_percent_run_by_run", roofline_ratios},
        {"read_pass_bytes", pass_bytes},
        {"read_pass_seconds_runs", pass_runs},
        {"decode_read_pass_percent_run_by_run", pass_ratios},
        {"decode_read_pass_percent_median", pass_ratio},
        {"peak_rss_bytes", engine_rss},
        {"rss_high_water_bytes", rss_high_water_bytes()},
        {"prefill_compute", {{"gops", prefill_gops}, {"unit", mac_unit_name(unit)}, {"peak_gops", peak.gops},
                             {"peak_gops_before_after", {peak_before, peak_after}},
                             {"fraction_of_peak", prefill_gops / peak.gops},
                             {"products_alone_gops", products_alone_gops},
                             {"macs_per_token", prefill_macs}}},
        {"fma_scaling", {{"threads", fma.threads}, {"one_thread_gflops", fma.one_thread_gflops},
                         {"all_threads_gflops", fma.all_threads_gflops}, {"cores_worth", fma_cores_worth(fma)},
                         {"loop", fma.isa}}},
        {"device", device_to_json(host_cpu())},
        {"policy", policy_to_json(policy)},
        {"decode_streaming", ops::decode_plan_to_json(ops::plan_decode_streaming(host_cpu()))},  // as mm.decode
        {"prefill_panel_rows", mm.panel_rows},
    };
    if (!streams.empty()) {
      nlohmann::json sj = nlohmann::json::array();
      for (const StreamsResult& st : streams)
        sj.push_back({{"streams", st.streams}, {"aggregate_tok_s", st.aggregate_tok_s}, {"per_stream_tok_s", st.per_stream_tok_s},
                      {"inter_token_ms_median", st.inter_token_ms_median}, {"inter_token_ms_p90", st.inter_token_ms_p90}});
      j["streams"] = sj;
    }
    if (!turns_cached.empty()) {
      auto turns_json = [](const std::vector<ChatTurn>& ts) {
        nlohmann::json arr = nlohmann::json::array();
        for (const ChatTurn& t : ts)
          arr.push_back({{"prompt_tokens", t.prompt_tokens}, {"cached_tokens", t.cached_tokens}, {"ttft_s", t.ttft_s}});
        return arr;
      };
      j["chat_turns"] = {{"with_prefix_cache", turns_json(turns_cached)}, {"without", turns_json(turns_cold)}};
    }
    if (masks)
      j["grammar_masks"] = {{"tokens", masks->tokens},
                            {"sentences", masks->sentences},
                            {"cold_tokens", masks->cold_tokens},
                            {"cold_matcher_ms", masks->cold_matcher_ms},
                            {"warm_tokens", masks->warm_tokens},
                            {"warm_matcher_ms", masks->warm_matcher_ms},
                            {"masked_sample_ms", masks->masked_sample_ms},
                            {"plain_sample_ms", masks->plain_sample_ms},
                            {"cold_ms_per_token", masks->cold_ms()},
                            {"warm_ms_per_token", masks->warm_ms()},
                            {"step_ms", masks->step_ms},
                            {"contexts", masks->contexts},
                            {"context_walk_ms", masks->context_walk_ms}};
    std::ofstream(*jf) << j.dump(2) << "\n";
    std::fprintf(stderr, "[bench] wrote %s\n", jf->c_str());
  }
  return 0;
}

const Registration reg{"bench", "measure load, prefill, decode, TTFT and RSS against the machine's bandwidth and compute peaks", kUsage, run};

}  // namespace
}  // namespace g4::cli
