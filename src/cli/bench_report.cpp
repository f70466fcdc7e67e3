// The figures of g4 bench's table, and the table itself: one line per figure, the median first,
// then in parentheses what it was measured against and the spread of its runs.
#include "cli/bench_report.h"

#include <cstdio>
#include <utility>

#include "cli/bench_stats.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "ops/matmul/matmul.h"

namespace g4::cli {
namespace {

void print_header_and_load(const BenchRig& r, const BenchFigures& fig) {
  const Model& model = *r.model;
  std::printf("g4 bench: %s (%s weights, %s KV), %d threads\n  %-34s %s\n  %-34s %s\n", model.path.string().c_str(),
              std::string(dtype_name(model.weights.layers[0].q_proj->dtype)).c_str(), kv_dtype_name(r.kv_options.dtype),
              r.flags.threads, "weight products", fig.executed.c_str(), "attention", fig.attention.c_str());
  std::printf("  %-34s %10.2f s\n", "cold load (mmap + validate)", r.load_s);
  std::printf("  %-34s %10.2f s  (%s)\n", "weights into memory", r.placed.seconds, describe_placement(r.placed).c_str());
  if (r.requant) {
    std::printf("  %-34s %10.2f s  (--weights %s)\n", "quantize at load", r.requant->requantized.seconds,
                r.requant->flag.c_str());
    const LogitShift& sh = r.requant->shift;
    std::printf("  %-34s %10.3f  (%s; a probe of %lld tokens, the run's own products against the checkpoint's "
                "weights with f32 compute; both probes %.2f s)\n",
                "logits moved by --weights", sh.max_abs, describe_logit_shift(sh).c_str(), (long long)sh.rows,
                r.requant->probe_s);
  }
  if (r.interleaved.tensors)
    std::printf("  %-34s %10.2f s  (%s)\n", "interleave rows at load", r.interleaved.seconds,
                describe_interleave(r.interleaved).c_str());
}

void print_prefill(const BenchRig& r, const PrefillRuns& p, const BenchFigures& fig) {
  const int64_t prompt_len = r.flags.prompt_len;
  std::printf("  %-34s %10.1f tok/s  (%lld tokens, first touch of the weights)\n", "prefill, cold",
              double(prompt_len) / p.cold_s, (long long)prompt_len);
  std::printf("  %-34s %10.1f tok/s  (median of %lld; runs %s)\n", "prefill, warm", fig.warm_prefill_tok_s,
              (long long)r.flags.repeat, run_range(fig.warm_runs_tok_s, 1).c_str());
  std::printf("  %-34s %10.1f%%  (the weight products' multiply-adds at the warm median, %.0f GOP/s, against the %s peak "
              "on %d threads measured in this run, %.0f GOP/s, the higher of %.0f before and %.0f after the prefills; "
              "attention and the rest not counted)\n",
              "prefill products / compute peak", 100.0 * fig.prefill_gops / r.peak.gops, fig.prefill_gops,
              mac_unit_name(r.unit), r.flags.threads, r.peak.gops, p.peak_before, p.peak_after);
  // The products alone, timed on the calling thread from hand-off to result: what the kernels
  // reach, apart from attention and the row-wise steps between them.
  const TokenTimes& m = fig.prefill_median;
  std::printf("  %-34s %10.1f ms  (the median run: weight products %.1f (alone %.0f GOP/s, %.1f%% of the peak), "
              "attention %.1f, the rest %.1f)\n",
              "prefill time, warm", m.total_ms, m.weight_products_ms, fig.products_alone_gops,
              100.0 * fig.products_alone_gops / r.peak.gops, m.attention_ms, m.rest_ms());
  std::printf("  %-34s %10.3f s cold, %.3f s warm\n", "time to first token", p.cold_s, median(p.warm_s));
}

void print_token_times(const std::string& label, const std::vector<TokenTimes>& ts) {
  const TokenTimes m = median_run(ts);
  std::printf("  %-34s %10.2f ms  (the median run: weight products %.2f, attention %.2f, the rest %.2f)\n", label.c_str(),
              m.total_ms, m.weight_products_ms, m.attention_ms, m.rest_ms());
}

void print_decode(const BenchRig& r, const DecodeRuns& d, const BenchFigures& fig) {
  const int64_t depth = r.flags.depth;
  std::printf("  %-34s %10.2f tok/s  (%lld tokens, median of %lld; runs %s)\n", "decode, depth 0", fig.depth0_tok_s,
              (long long)r.flags.gen, (long long)r.flags.repeat, run_range(d.depth0_tok_s, 2).c_str());
  if (depth > 0)  // each depth run against the depth-0 run just before it, too
    std::printf("  %-34s %10.2f tok/s  (%.1f%% of depth 0; runs %s; run by run %s%%, median %.1f%%)\n",
                ("decode, depth " + std::to_string(depth)).c_str(), fig.depth_tok_s,
                100.0 * fig.depth_tok_s / fig.depth0_tok_s, run_range(d.depth_tok_s, 2).c_str(),
                run_range(fig.depth_percent, 1).c_str(), median(fig.depth_percent));
  print_token_times("decode time per token, depth 0", d.depth0_times);
  if (depth > 0) print_token_times("decode time per token, depth " + std::to_string(depth), d.depth_times);
}

void print_rooflines(const BenchRig& r, const DecodeRuns& d, const BenchFigures& fig) {
  std::printf("  %-34s %10.1f MiB\n", "weight bytes read per token", double(fig.bytes_per_token) / (1 << 20));
  std::printf("  %-34s %10.1f GB/s  (%d threads, %.0f MiB buffer, best of %zu measurements: before, during and after the run; "
              "before each depth-0 run %s)\n",
              "memory-read bandwidth", d.bandwidth.best_gb_per_s, r.flags.threads,
              double(d.bandwidth.buffer_bytes) / (1 << 20), d.bandwidth_gb_s.size() + 2,
              run_range(d.bandwidth_gb_s, 1).c_str());
  std::printf("  %-34s %10.2f tok/s\n", "roofline (bandwidth / bytes)", fig.roofline_tok_s);
  std::printf("  %-34s %10.1f%%  (run by run, each depth-0 run against the bandwidth measured just before it: %s%%, "
              "median %.1f%%)\n",
              "decode / DRAM roofline", 100.0 * fig.depth0_tok_s / fig.roofline_tok_s,
              run_range(fig.roofline_percent, 1).c_str(), median(fig.roofline_percent));
  std::vector<double> pass_ms;
  for (double p : d.pass_s) pass_ms.push_back(p * 1e3);
  std::printf("  %-34s %10.2f ms  (%.1f MiB: every streamed matrix, top-k experts, read as decode reads them, nothing "
              "computed; %.1f GB/s; best of >= 3 passes and 40 ms, every way to read (ops::read_pass_ways), before each depth-0 run: %s ms)\n",
              "weight read pass", median(pass_ms), double(d.pass_bytes) / (1 << 20),
              double(d.pass_bytes) / (median(d.pass_s) * 1e9), run_range(pass_ms, 2).c_str());
  std::printf("  %-34s %10.1f%%  (median of the depth-0 runs each against the read pass just before it; runs %s%%)%s\n",
              "decode / read-pass roofline", fig.pass_percent_median, run_range(fig.pass_percent, 1).c_str(),
              fig.pass_percent_median > 100.0
                  ? "; above 100%: decode beat the passes paired with it, so a neighbour on the host "
                    "slowed those passes, or decode's products read ahead into caches the pass does not use"
                  : "");
  if (d.depth_pass_s.empty()) return;
  std::vector<double> depth_ms;
  for (double p : d.depth_pass_s) depth_ms.push_back(p * 1e3);
  const std::string at = "at depth " + std::to_string(r.flags.depth);
  std::printf("  %-34s %10.2f ms  (%.1f MiB: the weights as above, then the K/V of each layer that owns some, "
              "as attention's spans, once (KV-shared layers read them again); %.1f GB/s; before each depth run: %s "
              "ms)\n",
              ("read pass " + at).c_str(), median(depth_ms), double(d.depth_pass_bytes) / (1 << 20),
              double(d.depth_pass_bytes) / (median(d.depth_pass_s) * 1e9), run_range(depth_ms, 2).c_str());
  std::printf("  %-34s %10.1f%%  (median of the depth runs each against the read pass of its depth just before it; "
              "runs %s%%)%s\n",
              ("decode / read pass " + at).c_str(), fig.depth_pass_percent_median,
              run_range(fig.depth_pass_percent, 1).c_str(),
              fig.depth_pass_percent_median > 100.0 ? "; above 100%: as at depth 0, the passes were slowed or decode read ahead" : "");
}

void print_grammar_masks(const GrammarMaskCost& g) {
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

// Each count: the median of its rounds, the range, and the gain over one stream taken round by round.
void print_streams(const std::vector<StreamsRounds>& streams) {
  for (const StreamsRounds& c : streams) {
    std::vector<double> agg, itl, p90, step, products, attention;
    for (const StreamsResult& st : c.rounds) {
      agg.push_back(st.aggregate_tok_s);
      itl.push_back(st.inter_token_ms_median);
      p90.push_back(st.inter_token_ms_p90);
      step.push_back(st.step_ms);
      products.push_back(st.products_ms);
      attention.push_back(st.attention_ms);
    }
    std::string gain = "no 1-stream run to compare with";
    if (!c.gains.empty()) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%.2fx 1 stream in the same round, rounds %s", median(c.gains),
                    (run_range(c.gains, 2) + "x").c_str());
      gain = buf;
    }
    std::printf("  %-34s %10.2f tok/s  (median of %zu rounds, runs %s; %.2f per stream; %s; inter-token median %.1f "
                "ms, p90 %.1f ms; a step %.1f ms: weight products %.1f, attention %.1f, the rest %.1f)\n",
                ("decode, " + std::to_string(c.streams) + " stream" + (c.streams > 1 ? "s" : "")).c_str(), median(agg),
                c.rounds.size(), run_range(agg, 2).c_str(), median(agg) / c.streams, gain.c_str(), median(itl),
                median(p90), median(step), median(products), median(attention),
                median(step) - median(products) - median(attention));
  }
}

void print_chat_turns(const std::vector<ChatTurn>& cached, const std::vector<ChatTurn>& cold) {
  const ChatTurn& first = cached.front();
  const ChatTurn& last = cached.back();
  int64_t restored = 0;
  for (const ChatTurn& t : cached) restored += t.cached_tokens;
  std::printf("  %-34s %10.3f s  (turn 1, %lld prompt tokens: %.3f s; last turn / turn 1 = %.2fx; its %lld prompt "
              "tokens, %lld restored from the prefix cache; %lld restored over all turns; without the cache the "
              "last turn: %.3f s)\n",
              ("time to first token, chat turn " + std::to_string(cached.size())).c_str(), last.ttft_s,
              (long long)first.prompt_tokens, first.ttft_s, last.ttft_s / first.ttft_s, (long long)last.prompt_tokens,
              (long long)last.cached_tokens, (long long)restored, cold.back().ttft_s);
}

void print_machine(const BenchRig& r, const EngineRss& rss) {
  std::printf("  %-34s %10.1f GFLOP/s  (%s)\n", "FMA throughput, all threads", r.fma.all_threads_gflops,
              describe_fma_scaling(r.fma).c_str());
  std::printf("  %-34s %10.1f MiB  (the engine: the most sampled after the load, each prefill and each decode run; the "
              "process's high-water mark, with the bench's own 1 GiB bandwidth buffer, %.1f MiB)\n",
              "peak RSS", double(rss.bytes) / (1 << 20), double(rss_high_water_bytes()) / (1 << 20));
}

Spread spread_of_percents(const std::vector<PairedStep>& pairs) {
  std::vector<double> pct;
  for (const PairedStep& p : pairs) pct.push_back(p.percent());
  return spread_of(std::move(pct));
}

// Each depth-0 run against the ceilings measured just before it, and each depth run against it.
void derive_run_by_run(const DecodeRuns& d, BenchFigures& fig) {
  const std::vector<double>& dec0 = d.depth0_tok_s;
  for (size_t i = 0; i < d.depth_tok_s.size(); ++i) fig.depth_percent.push_back(100.0 * d.depth_tok_s[i] / dec0[i]);
  for (size_t i = 0; i < dec0.size(); ++i)
    fig.roofline_percent.push_back(100.0 * dec0[i] * double(fig.bytes_per_token) / (d.bandwidth_gb_s[i] * 1e9));
  // tokens/s x pass seconds
  for (size_t i = 0; i < dec0.size(); ++i) fig.pass_percent.push_back(100.0 * dec0[i] * d.pass_s[i]);
  fig.pass_percent_median = median(fig.pass_percent);
  for (size_t i = 0; i < d.depth_tok_s.size(); ++i) fig.depth_pass_percent.push_back(100.0 * d.depth_tok_s[i] * d.depth_pass_s[i]);
  if (!fig.depth_pass_percent.empty()) fig.depth_pass_percent_median = median(fig.depth_pass_percent);
  fig.paired = spread_of_percents(d.depth0_pairs);
  fig.depth_paired = spread_of_percents(d.depth_pairs);
}

// The paired steps: each token against the read pass of what it reads, timed just before it.
void print_paired_steps(const std::string& at, size_t tokens, const Spread& s) {
  if (tokens == 0) return;
  std::printf("  %-34s %10.1f%%  (median of %zu tokens, each right after a read pass of what it reads, every way "
              "once; quartiles %.1f-%.1f%%, extremes %.1f-%.1f%%)%s\n",
              ("decode / pass, paired, " + at).c_str(), s.median, tokens, s.q1, s.q3, s.lo, s.hi,
              s.median > 100.0 ? "; above 100%: the tokens beat the passes paired with them, so a neighbour slowed "
                                 "the passes or decode's products read ahead into caches the pass does not use"
                               : "");
}

}  // namespace

BenchFigures derive_figures(const BenchRig& r, const BenchResults& res) {
  const int64_t prompt_len = r.flags.prompt_len;
  const DecodeRuns& d = res.decode;
  BenchFigures fig;
  fig.bytes_per_token = weight_bytes_per_token(*r.model);
  fig.roofline_tok_s = d.bandwidth.best_gb_per_s * 1e9 / double(fig.bytes_per_token);
  fig.depth0_tok_s = median(d.depth0_tok_s);
  fig.depth_tok_s = d.depth_tok_s.empty() ? 0 : median(d.depth_tok_s);
  fig.warm_prefill_tok_s = double(prompt_len) / median(res.prefill.warm_s);
  for (double w : res.prefill.warm_s) fig.warm_runs_tok_s.push_back(double(prompt_len) / w);
  derive_run_by_run(d, fig);
  const DType streamed = r.model->weights.layers[0].q_proj->dtype;
  fig.executed = r.flags.reference ? std::string("f32 reference loops") : ops::describe_matmul(r.mm, streamed);
  fig.attention = describe_attention(kv_span_element(r.kv_options.dtype), r.ex);
  fig.prefill_macs = prefill_macs_per_token(*r.model, prompt_len);
  fig.prefill_gops = fig.warm_prefill_tok_s * 2 * fig.prefill_macs / 1e9;
  fig.prefill_median = median_run(res.prefill.warm_times);
  fig.products_alone_gops =
      2 * fig.prefill_macs * double(prompt_len) / (fig.prefill_median.weight_products_ms * 1e6);
  return fig;
}

void print_bench_table(const BenchRig& r, const BenchResults& res, const BenchFigures& fig) {
  print_header_and_load(r, fig);
  print_prefill(r, res.prefill, fig);
  print_decode(r, res.decode, fig);
  print_rooflines(r, res.decode, fig);
  print_paired_steps("depth 0", res.decode.depth0_pairs.size(), fig.paired);
  print_paired_steps("depth " + std::to_string(r.flags.depth), res.decode.depth_pairs.size(), fig.depth_paired);
  if (res.optional.masks) print_grammar_masks(*res.optional.masks);
  print_streams(res.optional.streams);
  if (res.optional.speculative) print_spec_bench(*res.optional.speculative);
  if (!res.optional.turns_cached.empty()) print_chat_turns(res.optional.turns_cached, res.optional.turns_cold);
  if (res.optional.vision) print_vision_bench(*res.optional.vision);
  print_machine(r, res.rss);
}

}  // namespace g4::cli
