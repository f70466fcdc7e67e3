// `g4 bench` reports the spread of its runs beside each median: the table's "runs lo-hi" ranges,
// the run-by-run depth ratios and the run-by-run roofline fractions must be those of the runs
// (and bandwidth passes) the JSON report lists, one per repeat.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/logit_probe.h"
#include "model/config.h"
#include "model/forward_reference.h"
#include "model/presets.h"
#include "model/requantize.h"
#include "model/synth.h"
#include "ops/amx/gemm_bf16_tiles.h"
#include "ops/matmul/gemm_bf16.h"
#include "platform/device.h"
#include "platform/dtype_policy.h"
#include "test_util.h"

namespace g4 {
namespace {

std::string range_of(const std::vector<double>& v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f-%.*f", digits, *std::min_element(v.begin(), v.end()), digits,
                *std::max_element(v.begin(), v.end()));
  return buf;
}

// `g4 bench` of a synthetic bf16 tiny-e (or `preset`), 4-token prompt, 2 decoded tokens, 2 threads, with
// `extra` flags: its JSON report (null when a command failed; *out holds the output).
nlohmann::json bench_tiny_e(const std::string& extra, std::string* out, const std::string& preset = "tiny-e") {
  test::TempDir dir;
  const std::string model = (dir.path() / "m").string(), json = (dir.path() / "b.json").string();
  if (test::g4_command("synth --preset " + preset + " --dtype bf16 --out " + model, out) != 0) return nullptr;
  if (test::g4_command("bench --model " + model + " --prompt-len 4 --gen 2 --threads 2 " + extra + " --json " + json, out) != 0)
    return nullptr;
  return nlohmann::json::parse(std::ifstream(json));
}

TEST(BenchReport, RangesAndRunByRunRatiosAreThoseOfTheListedRuns) {
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 40 --repeat 3", &out);
  ASSERT_FALSE(j.is_null()) << out;
  // The AMX-BF16 tile kernel's check on this CPU, as g4 device reports it.
  EXPECT_EQ(j.at("amx_bf16_kernel_check").at("passed").get<bool>(), host_cpu().amx_bf16_usable()) << j.dump();
  const auto d0 = j.at("decode_runs_depth0").get<std::vector<double>>();
  const auto dd = j.at("decode_runs_depth").get<std::vector<double>>();
  const auto ratios = j.at("decode_depth_percent_run_by_run").get<std::vector<double>>();
  const auto warm = j.at("prefill_warm_runs_tok_s").get<std::vector<double>>();
  ASSERT_EQ(d0.size(), 3u);
  ASSERT_EQ(dd.size(), 3u);
  ASSERT_EQ(ratios.size(), 3u);
  ASSERT_EQ(warm.size(), 3u);
  for (size_t r = 0; r < 3; ++r) EXPECT_NEAR(ratios[r], 100.0 * dd[r] / d0[r], 1e-9 * ratios[r]);
  EXPECT_NE(out.find("median of 3; runs " + range_of(d0, 2) + ")"), std::string::npos) << out;
  EXPECT_NE(out.find("; runs " + range_of(dd, 2) + "; run by run " + range_of(ratios, 1) + "%"), std::string::npos) << out;
  EXPECT_NE(out.find("(median of 3; runs " + range_of(warm, 1) + ")"), std::string::npos) << out;
  // Each depth-0 run against the bandwidth measured just before it; the ceiling is the best of
  // every measurement, those included.
  const auto bw_runs = j.at("bandwidth_runs_gb_s").get<std::vector<double>>();
  const auto roof = j.at("decode_roofline_percent_run_by_run").get<std::vector<double>>();
  ASSERT_EQ(bw_runs.size(), 3u);
  ASSERT_EQ(roof.size(), 3u);
  const double bytes = j.at("weight_bytes_per_token").get<double>();
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_GT(bw_runs[r], 0.0);
    EXPECT_NEAR(roof[r], 100.0 * d0[r] * bytes / (bw_runs[r] * 1e9), 1e-9 * roof[r]);
    EXPECT_GE(j.at("bandwidth_gb_s").get<double>(), bw_runs[r]);
  }
  EXPECT_NE(out.find("measured just before it: " + range_of(roof, 1) + "%"), std::string::npos) << out;
  EXPECT_NE(out.find("before each depth-0 run " + range_of(bw_runs, 1) + ")"), std::string::npos) << out;
  // The read-pass roofline: each depth-0 run against the pass just before it, tokens/s x seconds;
  // the pass reads the streamed matrices, nearly all of the bytes a token reads (the rest are
  // norm vectors and the gathered embedding rows).
  const auto pass_s = j.at("read_pass_seconds_runs").get<std::vector<double>>();
  const auto pass_pct = j.at("decode_read_pass_percent_run_by_run").get<std::vector<double>>();
  ASSERT_EQ(pass_s.size(), 3u);
  ASSERT_EQ(pass_pct.size(), 3u);
  for (size_t r = 0; r < 3; ++r) EXPECT_NEAR(pass_pct[r], 100.0 * d0[r] * pass_s[r], 1e-9 * pass_pct[r]);
  std::vector<double> pass_sorted = pass_pct;
  std::sort(pass_sorted.begin(), pass_sorted.end());
  EXPECT_DOUBLE_EQ(j.at("decode_read_pass_percent_median").get<double>(), pass_sorted[1]);
  const double pass_bytes = j.at("read_pass_bytes").get<double>();
  EXPECT_LE(pass_bytes, bytes);
  EXPECT_GE(pass_bytes, 0.9 * bytes) << "the pass misses matrices decode streams";
  EXPECT_NE(out.find("read pass just before it; runs " + range_of(pass_pct, 1) + "%"), std::string::npos) << out;
  // At depth 40 the pass also reads the cache a token attends over: on each layer that owns K/V
  // (tiny-e: 5 of 10), the window's other positions (sliding) or all 40 (full), K and V in the
  // cache dtype the policy picks for a bf16 checkpoint on the CPU this runs on (bf16 where it has
  // a bf16 datapath, f16 with F16C, else f32): asserted from the probe, never from one machine.
  const ModelConfig c = preset_config("tiny-e");
  const DevicePolicy policy = resolve_policy(host_cpu(), NumFormat::BF16);
  const uint64_t kv_elem = policy.kv == NumFormat::F32 ? 4 : 2;
  uint64_t kv_bytes = 0;
  for (const LayerPlan& p : c.layers)
    if (!p.kv_shared)
      kv_bytes += uint64_t(p.type == LayerType::Sliding ? c.sliding_window - 1 : 40) * uint64_t(p.kv_heads * p.head_dim) * 2 * kv_elem;
  EXPECT_EQ(j.at("kv_dtype").get<std::string>(), std::string(num_format_name(policy.kv)));
  EXPECT_EQ(j.at("depth_read_pass_bytes").get<uint64_t>(), j.at("read_pass_bytes").get<uint64_t>() + kv_bytes);
  const auto depth_pass_s = j.at("depth_read_pass_seconds_runs").get<std::vector<double>>();
  const auto depth_pct = j.at("decode_depth_read_pass_percent_run_by_run").get<std::vector<double>>();
  ASSERT_EQ(depth_pass_s.size(), 3u);
  ASSERT_EQ(depth_pct.size(), 3u);
  for (size_t r = 0; r < 3; ++r) EXPECT_NEAR(depth_pct[r], 100.0 * dd[r] * depth_pass_s[r], 1e-9 * depth_pct[r]);
  EXPECT_NE(out.find("read pass of its depth just before it; runs " + range_of(depth_pct, 1) + "%"), std::string::npos) << out;
  // The paired steps: --gen tokens from depth 0 and from --depth, each against the pass timed just
  // before it (pass seconds / token seconds); the median and quartiles of the sorted percents.
  for (const auto& [key, at] : {std::pair{"decode_read_pass_paired_steps", std::string("depth 0")},
                                {"decode_depth_read_pass_paired_steps", std::string("depth 40")}}) {
    const nlohmann::json& ps = j.at(key);
    ASSERT_EQ(ps.at("steps").size(), 2u) << key;  // --gen 2
    std::vector<double> pct;
    for (const auto& st : ps.at("steps")) {
      const double pass = st.at("pass_s"), token = st.at("token_s");
      EXPECT_GT(pass, 0.0) << key;
      EXPECT_GT(token, 0.0) << key;
      EXPECT_NEAR(st.at("percent").get<double>(), 100.0 * pass / token, 1e-9 * 100.0 * pass / token) << key;
      pct.push_back(st.at("percent"));
    }
    std::sort(pct.begin(), pct.end());
    EXPECT_DOUBLE_EQ(ps.at("percent_median").get<double>(), pct[1]) << key;
    EXPECT_DOUBLE_EQ(ps.at("percent_q1").get<double>(), pct[0]) << key;
    EXPECT_DOUBLE_EQ(ps.at("percent_min").get<double>(), pct[0]) << key;
    EXPECT_DOUBLE_EQ(ps.at("percent_max").get<double>(), pct[1]) << key;
    char line[200];
    std::snprintf(line, sizeof line, "decode / pass, paired, %s", at.c_str());
    EXPECT_NE(out.find(line), std::string::npos) << out;
    std::snprintf(line, sizeof line, "(median of 2 tokens, each right after a read pass of what it reads, every way once; "
                  "quartiles %.1f-%.1f%%, extremes %.1f-%.1f%%)", pct[0], pct[1], pct[0], pct[1]);
    EXPECT_NE(out.find(line), std::string::npos) << out;
  }
  // Where a token's time went, per run: its total is that run's 1000 / tok/s; the weight products
  // and attention are counted and leave a non-negative rest; the table prints the run whose total
  // is the median.
  for (const auto& [key, runs] : {std::pair{"decode_ms_per_token_depth0", d0}, {"decode_ms_per_token_depth", dd}}) {
    const auto& parts = j.at(key);
    ASSERT_EQ(parts.size(), 3u) << key;
    std::vector<std::pair<double, std::string>> by_total;
    for (size_t r = 0; r < 3; ++r) {
      const double total = parts[r].at("total"), products = parts[r].at("weight_products"),
                   attention = parts[r].at("attention"), rest = parts[r].at("rest");
      EXPECT_NEAR(total, 1000.0 / runs[r], 1e-9 * total) << key << " run " << r;
      EXPECT_GT(products, 0.0) << key;
      EXPECT_GT(attention, 0.0) << key;
      EXPECT_GE(rest, 0.0) << key;
      EXPECT_NEAR(products + attention + rest, total, 1e-9 * total) << key;
      char line[160];
      std::snprintf(line, sizeof line, "%.2f ms  (the median run: weight products %.2f, attention %.2f, the rest %.2f)",
                    total, products, attention, rest);
      by_total.emplace_back(total, line);
    }
    std::sort(by_total.begin(), by_total.end());
    EXPECT_NE(out.find(by_total[1].second), std::string::npos) << key << "\n" << out;
  }
  // A warm prefill's time, per run: its total is that run's prompt / tok/s; the products' own
  // rate is the multiply-adds over the median run's product time.
  const auto& pf = j.at("prefill_ms_warm");
  ASSERT_EQ(pf.size(), 3u);
  std::vector<std::pair<double, double>> prefill_by_total;  // total, products
  for (size_t r = 0; r < 3; ++r) {
    const double total = pf[r].at("total"), products = pf[r].at("weight_products"), attention = pf[r].at("attention"),
                 rest = pf[r].at("rest");
    EXPECT_NEAR(total, 1000.0 * 4 / warm[r], 1e-9 * total) << "prefill run " << r;
    EXPECT_GT(products, 0.0);
    EXPECT_GT(attention, 0.0);
    EXPECT_GE(rest, 0.0);
    EXPECT_NEAR(products + attention + rest, total, 1e-9 * total);
    prefill_by_total.emplace_back(total, products);
  }
  std::sort(prefill_by_total.begin(), prefill_by_total.end());
  const nlohmann::json& pc = j.at("prefill_compute");
  const double alone = 2 * pc.at("macs_per_token").get<double>() * 4 / (prefill_by_total[1].second * 1e6);
  EXPECT_NEAR(pc.at("products_alone_gops").get<double>(), alone, 1e-9 * alone) << pc.dump();
  char prefill_line[96];
  std::snprintf(prefill_line, sizeof prefill_line, "%.1f ms  (the median run: weight products %.1f (alone %.0f GOP/s",
                prefill_by_total[1].first, prefill_by_total[1].second, alone);
  EXPECT_NE(out.find(prefill_line), std::string::npos) << out;
  // The medians the table prints are the middle runs.
  std::vector<double> sorted = d0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(j.at("decode_depth0_tok_s").get<double>(), sorted[1]);
}

// The prefill's weight products against the peak of the instruction they issue: the multiply-adds
// per token counted here from the checkpoint's tensor list (every matrix once, the embedding
// tables gathered, not multiplied, the experts' [E, out, in] tensors at top-k of E, the tied head
// once per 4-token prompt), the rate from the warm median, the peak measured in the run, all as

// With an int8 cache the depth pass reads each row's values and its per-head f32 scales: on
// tiny-e's owning layers (kv_heads x head_dim) + 4 x kv_heads bytes a row, K and V.
TEST(BenchReport, DepthPassReadsInt8ScalesToo) {
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 40 --repeat 1 --kv int8", &out);
  ASSERT_FALSE(j.is_null()) << out;
  ASSERT_EQ(j.at("kv_dtype").get<std::string>(), "int8");
  const ModelConfig c = preset_config("tiny-e");
  uint64_t kv_bytes = 0;
  for (const LayerPlan& p : c.layers)
    if (!p.kv_shared)
      kv_bytes += uint64_t(p.type == LayerType::Sliding ? c.sliding_window - 1 : 40) *
                  uint64_t(p.kv_heads * p.head_dim + 4 * p.kv_heads) * 2;
  // The pass reads each range's whole 8-byte words: a scale range of 7 rows (28 bytes) reads 24,
  // so up to 7 bytes short per range, at most 4 ranges (K, V and their scales) per owning layer.
  const uint64_t got = j.at("depth_read_pass_bytes").get<uint64_t>() - j.at("read_pass_bytes").get<uint64_t>();
  EXPECT_LE(got, kv_bytes);
  EXPECT_GE(got + 7 * 4 * 5, kv_bytes);
}

// the table prints them.
class BenchPrefillCompute : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchPrefillCompute, IsTheProductsMultiplyAddsAgainstTheMeasuredPeak) {
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 0 --repeat 1", &out, GetParam());
  ASSERT_FALSE(j.is_null()) << out;
  ModelConfig c = preset_config(GetParam());
  c.finalize();
  double macs = 0;
  for (const TensorSpec& t : checkpoint_tensor_specs(c, DType::BF16, "")) {
    if (t.shape.size() < 2 || t.name.find("embed_tokens") != std::string::npos) continue;
    double n = 1;
    for (int64_t d : t.shape) n *= double(d);
    if (t.shape.size() == 3) n *= double(c.top_k_experts) / double(c.num_experts);
    macs += n;
  }
  macs += double(c.vocab_size) * double(c.hidden_size) / 4;  // the tied head, for the last token only
  const nlohmann::json& pc = j.at("prefill_compute");
  EXPECT_DOUBLE_EQ(pc.at("macs_per_token").get<double>(), macs);
  const double gops = pc.at("gops"), peak = pc.at("peak_gops");
  EXPECT_NEAR(gops, j.at("prefill_warm_tok_s").get<double>() * 2 * macs / 1e9, 1e-9 * gops);
  EXPECT_GT(peak, 0.0);
  // The divisor is the higher of the two measurements, before and after the prefills.
  const std::vector<double> both = pc.at("peak_gops_before_after");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_GT(std::min(both[0], both[1]), 0.0);
  EXPECT_DOUBLE_EQ(peak, std::max(both[0], both[1]));
  EXPECT_NEAR(pc.at("fraction_of_peak").get<double>(), gops / peak, 1e-12);
  const std::string unit = pc.at("unit");
  // The tiles where this CPU confirmed them (probe, self-test, kernel check), else VDPBF16PS.
  EXPECT_EQ(unit, ops::amx_bf16_kernel_usable() ? "TDPBF16PS" : ops::gemm_bf16_available() ? "VDPBF16PS" : "f32 FMA");
  char line[200];
  std::snprintf(line, sizeof line, "%.1f%%  (the weight products' multiply-adds at the warm median, %.0f GOP/s, against the %s peak",
                100.0 * gops / peak, gops, unit.c_str());
  EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
}

// `--weights q8` reports how far the logits moved: with --compute f32 both of its probes run f32
// products, so its figures must be those of the reference loops' forward pass over the same
// tokens, on the checkpoint's weights and on the same weights re-encoded (computed here).
// --grammar: decodes --gen tokens under the grammar, restarting it at every complete sentence.
// With `root ::= "ab"` a sentence is at most two tokens, so the first ("cold") one is short and
// the rest are counted warm; every token is counted once. A schema g4 cannot honour is an error
// naming the file and the keyword.
TEST(BenchReport, GrammarMasksCountEveryTokenOnceAndRestartPerSentence) {
  test::TempDir dir;
  test::write_file(dir.path() / "ab.gbnf", "root ::= \"ab\"\n");
  test::write_file(dir.path() / "bad.json", R"({"type":"string","format":"email"})");
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 0 --repeat 1 --gen 24 --grammar " + (dir.path() / "ab.gbnf").string(), &out);
  ASSERT_FALSE(j.is_null()) << out;
  const nlohmann::json& g = j.at("grammar_masks");
  EXPECT_EQ(g.at("tokens"), 24) << g.dump();
  EXPECT_EQ(g.at("cold_tokens").get<int>() + g.at("warm_tokens").get<int>(), 24) << g.dump();
  EXPECT_LE(g.at("cold_tokens").get<int>(), 2) << g.dump();
  EXPECT_GE(g.at("sentences").get<int>(), 11) << g.dump();
  EXPECT_GT(g.at("step_ms").get<double>(), 0.0);
  EXPECT_GE(g.at("cold_ms_per_token").get<double>(), g.at("cold_matcher_ms").get<double>());
  EXPECT_NE(out.find("grammar masks / decode step, cold"), std::string::npos) << out;
  EXPECT_TRUE(bench_tiny_e("--depth 0 --repeat 1 --json-schema " + (dir.path() / "bad.json").string(), &out).is_null());
  EXPECT_NE(out.find("bad.json: schema keyword 'format'"), std::string::npos) << out;
}

// --streams: one entry per count, the aggregate being the per-stream rate times the count.
// --chat-turns: with the prefix cache every later turn restores all it resends but the previous
// answer's last token (sampled, never fed) and the new 32-token message; without it, nothing.
TEST(BenchReport, StreamsAndChatTurns) {
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 0 --repeat 3 --gen 8 --streams 3,1 --chat-turns 4", &out);
  ASSERT_FALSE(j.is_null()) << out;
  // Every count runs once per round (--repeat 3); each round's gain is its aggregate over the
  // same round's 1-stream aggregate, whatever the order of the list; the medians are the middle rounds.
  const nlohmann::json& st = j.at("streams");
  ASSERT_EQ(st.size(), 2u) << st.dump();
  EXPECT_EQ(st[0].at("streams"), 3);
  EXPECT_EQ(st[1].at("streams"), 1);
  std::vector<double> gains, agg3;
  for (size_t r = 0; r < 3; ++r) {
    const nlohmann::json &three = st[0].at("rounds").at(r), &one = st[1].at("rounds").at(r);
    const double a3 = three.at("aggregate_tok_s"), a1 = one.at("aggregate_tok_s");
    EXPECT_GT(a1, 0.0);
    EXPECT_NEAR(three.at("per_stream_tok_s").get<double>() * 3, a3, 1e-6 * a3);
    EXPECT_NEAR(three.at("gain_over_one_stream").get<double>(), a3 / a1, 1e-9 * a3 / a1) << "round " << r;
    EXPECT_DOUBLE_EQ(one.at("gain_over_one_stream").get<double>(), 1.0);
    // The decode phase: every stream prefills in the first step, then one step per later token,
    // timed whole and split into the products, the attention and the rest.
    for (const nlohmann::json* run : {&three, &one}) {
      EXPECT_EQ(run->at("decode_steps"), 7) << run->dump();
      const double step = run->at("step_ms"), products = run->at("weight_products_ms"), attention = run->at("attention_ms");
      EXPECT_GT(products, 0.0) << run->dump();
      EXPECT_GT(attention, 0.0) << run->dump();
      EXPECT_LT(products + attention, step) << run->dump();
    }
    gains.push_back(a3 / a1);
    agg3.push_back(a3);
  }
  std::sort(gains.begin(), gains.end());
  std::sort(agg3.begin(), agg3.end());
  EXPECT_NEAR(st[0].at("gain_over_one_stream_median").get<double>(), gains[1], 1e-9 * gains[1]);
  EXPECT_DOUBLE_EQ(st[0].at("aggregate_tok_s_median").get<double>(), agg3[1]);
  char line[160];
  std::snprintf(line, sizeof line, "%.2fx 1 stream in the same round, rounds %.2f-%.2fx", gains[1], gains[0], gains[2]);
  EXPECT_NE(out.find(line), std::string::npos) << out;
  const nlohmann::json& hot = j.at("chat_turns").at("with_prefix_cache");
  const nlohmann::json& cold = j.at("chat_turns").at("without");
  ASSERT_EQ(hot.size(), 4u);
  ASSERT_EQ(cold.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(hot[t].at("prompt_tokens"), cold[t].at("prompt_tokens"));
    EXPECT_EQ(cold[t].at("cached_tokens"), 0);
    EXPECT_EQ(hot[t].at("cached_tokens").get<int64_t>(), t == 0 ? 0 : hot[t].at("prompt_tokens").get<int64_t>() - 32 - 1)
        << "turn " << t;
  }
  EXPECT_NE(out.find("decode, 3 streams"), std::string::npos) << out;
  EXPECT_NE(out.find("a step "), std::string::npos) << out;
  EXPECT_NE(out.find("time to first token, chat turn 4"), std::string::npos) << out;
}

TEST(BenchReport, LogitsMovedByWeightsAreThoseOfTheReferenceLoops) {
  const auto hf = test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf";
  test::TempDir dir;
  const std::string json = (dir.path() / "b.json").string();
  std::string out;
  ASSERT_EQ(test::g4_command("bench --model " + hf.string() +
                                 " --prompt-len 4 --gen 2 --depth 0 --repeat 1 --threads 2 --weights q8 --compute f32 --json " + json,
                             &out),
            0)
      << out;
  const nlohmann::json r = nlohmann::json::parse(std::ifstream(json)).at("requantize_logits");
  auto m = load_model(hf);
  const std::vector<int> tokens = probe_tokens(m->config, 8);
  const std::vector<float> before = forward_reference(*m, tokens);
  requantize_weights(*m, DType::Q8_0, nullptr);
  const LogitShift want = compare_logits(before, forward_reference(*m, tokens), m->config.vocab_size);
  ASSERT_GT(want.max_abs, 0.0);
  EXPECT_EQ(r.at("probe_tokens").get<int64_t>(), 8);
  // The SIMD f32 products and the loops round differently (~1e-3 on these logits, see
  // LogitProbe.SimdProbeLogitsMatchTheReferenceLoops), the quantization moves them ~0.1-1.
  EXPECT_NEAR(r.at("max_abs").get<double>(), want.max_abs, 0.01 + 0.02 * want.max_abs) << r.dump();
  EXPECT_NEAR(r.at("mean_abs").get<double>(), want.mean_abs, 0.02 * want.mean_abs) << r.dump();
  EXPECT_NEAR(r.at("rms_ratio").get<double>(), want.rms_ratio, 0.02 * want.rms_ratio) << r.dump();
  EXPECT_NEAR(r.at("mean_kl_nats").get<double>(), want.mean_kl, 0.05 * want.mean_kl) << r.dump();
  EXPECT_NE(out.find("logits moved by --weights"), std::string::npos) << out;
  // Without --weights there is nothing to report.
  ASSERT_EQ(test::g4_command("bench --model " + hf.string() + " --prompt-len 4 --gen 2 --depth 0 --repeat 1 --threads 2 --json " + json,
                             &out),
            0)
      << out;
  EXPECT_TRUE(nlohmann::json::parse(std::ifstream(json)).at("requantize_logits").is_null());
  EXPECT_EQ(out.find("logits moved"), std::string::npos) << out;
}

// `g4 generate --weights q4` says on stderr how far the logits moved, before it generates.
TEST(GenerateReport, WeightsReportTheLogitShift) {
  const auto hf = test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf";
  std::string out;
  ASSERT_EQ(test::g4_command("generate --model " + hf.string() + " --tokens 2,17,33 -n 3 --threads 2 --weights q4", &out), 0)
      << out;
  EXPECT_NE(out.find("--weights q4: logits on a probe of 8 tokens against the checkpoint's weights (f32 compute): max |delta| "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("top-1 same "), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Presets, BenchPrefillCompute, ::testing::Values("tiny-e", "tiny-moe"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param == "tiny-e" ? "Dense" : "Moe"; });

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// `g4 bench --speculative ngram`: the verify steps for k = 0..8 and four decode rows per round.
// The replay drafter proposes plain decoding's own tokens, so every draft must be accepted and
// each verify step must yield k + 1 tokens; the random drafter's proposals are never all right.
TEST(BenchReport, SpeculativeRunsReportTheirAcceptance) {
  std::string out;
  const nlohmann::json j = bench_tiny_e("--depth 0 --repeat 2 --gen 21 --speculative ngram --draft-k 4", &out);
  ASSERT_FALSE(j.is_null()) << out;
  const nlohmann::json& s = j.at("speculative");
  EXPECT_EQ(s.at("mode"), "ngram");
  ASSERT_EQ(s.at("verify").size(), 9u);
  EXPECT_DOUBLE_EQ(s.at("verify")[0].at("vs_one_row").get<double>(), 1.0);
  ASSERT_EQ(s.at("decode").size(), 4u);
  for (const auto& d : s.at("decode")) EXPECT_EQ(d.at("tok_s").size(), 2u) << d.dump();
  const nlohmann::json& replay = s.at("decode")[2].at("speculation");
  EXPECT_EQ(s.at("decode")[2].at("name"), "replay (ceiling)");
  EXPECT_DOUBLE_EQ(replay.at("acceptance").get<double>(), 1.0) << replay.dump();
  EXPECT_DOUBLE_EQ(replay.at("tokens_per_step").get<double>(), 5.0) << replay.dump();  // 20 tokens after the first, 4 steps of 5
  const nlohmann::json& random = s.at("decode")[3].at("speculation");
  EXPECT_LT(random.at("acceptance").get<double>(), 0.5) << random.dump();
  EXPECT_NE(out.find("decode, replay (ceiling)"), std::string::npos) << out;
}

}  // namespace
}  // namespace g4
