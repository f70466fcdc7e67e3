// g4 bench --json FILE: the figures of the table and the runs behind them, with the device, the
// dtype policy, the kernels, the decode streaming plan and the prefill panel rows, as one object.
// nlohmann::json orders an object's keys, so each part adds its own keys.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "cli/bench_report.h"
#include "cli/bench_stats.h"
#include "cli/kernel_checks.h"
#include "ops/matmul/dot_kernels.h"
#include "platform/device.h"
#include "platform/dtype_policy.h"

namespace g4::cli {
namespace {

nlohmann::json times_json(const std::vector<TokenTimes>& ts) {
  nlohmann::json runs = nlohmann::json::array();
  for (const TokenTimes& t : ts)
    runs.push_back({{"total", t.total_ms}, {"weight_products", t.weight_products_ms}, {"attention", t.attention_ms},
                    {"rest", t.rest_ms()}});
  return runs;
}

nlohmann::json requantize_json(const std::optional<WeightsAtLoad>& requant) {
  if (!requant) return nlohmann::json(nullptr);
  return {{"probe_tokens", requant->shift.rows},     {"after_path", requant->after_path},
          {"max_abs", requant->shift.max_abs},       {"mean_abs", requant->shift.mean_abs},
          {"rms_ratio", requant->shift.rms_ratio},   {"mean_kl_nats", requant->shift.mean_kl},
          {"max_kl_nats", requant->shift.max_kl},    {"top1_same", requant->shift.top1_same},
          {"probe_s", requant->probe_s}};
}

// What ran: the model, the flags, the kernels, and what the load did to the weights.
void add_setup(nlohmann::json& j, const std::string& weights_flag, const BenchRig& r, const BenchFigures& fig) {
  const BenchFlags& f = r.flags;
  j.update({
      {"model", r.model->path.string()},
      {"weights_dtype", std::string(dtype_name(r.model->weights.dtype))},
      {"kv_dtype", kv_dtype_name(r.kv_options.dtype)},
      {"threads", f.threads},
      {"kernels", f.reference ? "reference" : ops::dot_kernel_target()},
      {"weight_products", fig.executed},
      {"attention", fig.attention},
      {"prompt_len", f.prompt_len},
      {"gen", f.gen},
      {"depth", f.depth},
      {"repeat", f.repeat},
      {"cold_load_s", r.load_s},
      {"weights_requantized", weights_flag},
      {"requantize_s", r.requant ? r.requant->requantized.seconds : 0.0},
      {"requantize_logits", requantize_json(r.requant)},
      {"interleave", {{"matrices", r.interleaved.tensors}, {"bytes", r.interleaved.bytes},
                      {"seconds", r.interleaved.seconds}, {"left_row_major_mapped", r.interleaved.left_mapped}}},
      {"weight_memory", {{"placement", r.placed.placement}, {"reason", r.placed.reason}, {"bytes", r.placed.bytes},
                         {"huge_page_bytes", r.placed.huge_bytes}, {"seconds", r.placed.seconds}}},
  });
  add_kernel_checks_json(j);
}

void add_prefill_and_decode(nlohmann::json& j, const BenchRig& r, const BenchResults& res, const BenchFigures& fig) {
  const PrefillRuns& p = res.prefill;
  const DecodeRuns& d = res.decode;
  j.update({
      {"prefill_cold_tok_s", double(r.flags.prompt_len) / p.cold_s},
      {"prefill_warm_tok_s", fig.warm_prefill_tok_s},
      {"ttft_cold_s", p.cold_s},
      {"ttft_warm_s", median(p.warm_s)},
      {"decode_depth0_tok_s", fig.depth0_tok_s},
      {"decode_depth_tok_s", fig.depth_tok_s},
      {"decode_runs_depth0", d.depth0_tok_s},
      {"decode_runs_depth", d.depth_tok_s},
      {"decode_depth_percent_run_by_run", fig.depth_percent},
      {"decode_ms_per_token_depth0", times_json(d.depth0_times)},
      {"decode_ms_per_token_depth", times_json(d.depth_times)},
      {"prefill_warm_runs_tok_s", fig.warm_runs_tok_s},
      {"prefill_ms_warm", times_json(p.warm_times)},
      {"prefill_compute", {{"gops", fig.prefill_gops}, {"unit", mac_unit_name(r.unit)}, {"peak_gops", r.peak.gops},
                           {"peak_gops_before_after", {p.peak_before, p.peak_after}},
                           {"fraction_of_peak", fig.prefill_gops / r.peak.gops},
                           {"products_alone_gops", fig.products_alone_gops},
                           {"macs_per_token", fig.prefill_macs}}},
  });
}

// Every pair's pass and token seconds and its percent, and their spread (bench_stats.h).
nlohmann::json paired_json(const std::vector<PairedStep>& pairs, const Spread& s) {
  nlohmann::json steps = nlohmann::json::array();
  for (const PairedStep& p : pairs) steps.push_back({{"pass_s", p.pass_s}, {"token_s", p.token_s}, {"percent", p.percent()}});
  return {{"steps", steps}, {"percent_median", s.median}, {"percent_q1", s.q1}, {"percent_q3", s.q3},
          {"percent_min", s.lo}, {"percent_max", s.hi}};
}

// The ceilings decode is held against, the memory, and the machine.
void add_rooflines_and_machine(nlohmann::json& j, const BenchRig& r, const BenchResults& res, const BenchFigures& fig) {
  const DecodeRuns& d = res.decode;
  j.update({
      {"weight_bytes_per_token", fig.bytes_per_token},
      {"bandwidth_gb_s", d.bandwidth.best_gb_per_s},
      {"roofline_tok_s", fig.roofline_tok_s},
      {"decode_fraction_of_roofline", fig.depth0_tok_s / fig.roofline_tok_s},
      {"bandwidth_runs_gb_s", d.bandwidth_gb_s},
      {"decode_roofline_percent_run_by_run", fig.roofline_percent},
      {"read_pass_bytes", d.pass_bytes},
      {"read_pass_seconds_runs", d.pass_s},
      {"decode_read_pass_percent_run_by_run", fig.pass_percent},
      {"decode_read_pass_percent_median", fig.pass_percent_median},
      {"depth_read_pass_bytes", d.depth_pass_bytes},
      {"depth_read_pass_seconds_runs", d.depth_pass_s},
      {"decode_depth_read_pass_percent_run_by_run", fig.depth_pass_percent},
      {"decode_depth_read_pass_percent_median", fig.depth_pass_percent_median},
      {"decode_read_pass_paired_steps", paired_json(d.depth0_pairs, fig.paired)},
      {"decode_depth_read_pass_paired_steps", paired_json(d.depth_pairs, fig.depth_paired)},
      {"peak_rss_bytes", res.rss.bytes},
      {"rss_high_water_bytes", rss_high_water_bytes()},
      {"fma_scaling", {{"threads", r.fma.threads}, {"one_thread_gflops", r.fma.one_thread_gflops},
                       {"all_threads_gflops", r.fma.all_threads_gflops}, {"cores_worth", fma_cores_worth(r.fma)},
                       {"loop", r.fma.isa}}},
      {"device", device_to_json(host_cpu())},
      {"policy", policy_to_json(r.compute.policy)},
      {"decode_streaming", ops::decode_plan_to_json(ops::plan_decode_streaming(host_cpu()))},  // as mm.decode
      {"prefill_panel_rows", r.mm.panel_rows},
  });
}

nlohmann::json streams_json(const std::vector<StreamsRounds>& streams) {
  nlohmann::json sj = nlohmann::json::array();
  for (const StreamsRounds& c : streams) {
    nlohmann::json rounds = nlohmann::json::array();
    std::vector<double> agg;
    for (size_t i = 0; i < c.rounds.size(); ++i) {
      const StreamsResult& st = c.rounds[i];
      agg.push_back(st.aggregate_tok_s);
      rounds.push_back({{"aggregate_tok_s", st.aggregate_tok_s}, {"per_stream_tok_s", st.per_stream_tok_s},
                        {"inter_token_ms_median", st.inter_token_ms_median}, {"inter_token_ms_p90", st.inter_token_ms_p90},
                        {"decode_steps", st.decode_steps}, {"step_ms", st.step_ms}, {"weight_products_ms", st.products_ms},
                        {"attention_ms", st.attention_ms},
                        {"gain_over_one_stream", i < c.gains.size() ? nlohmann::json(c.gains[i]) : nlohmann::json()}});
    }
    sj.push_back({{"streams", c.streams}, {"aggregate_tok_s_median", median(agg)},
                  {"gain_over_one_stream_median", c.gains.empty() ? nlohmann::json() : nlohmann::json(median(c.gains))},
                  {"rounds", rounds}});
  }
  return sj;
}

nlohmann::json turns_json(const std::vector<ChatTurn>& ts) {
  nlohmann::json arr = nlohmann::json::array();
  for (const ChatTurn& t : ts)
    arr.push_back({{"prompt_tokens", t.prompt_tokens}, {"cached_tokens", t.cached_tokens}, {"ttft_s", t.ttft_s}});
  return arr;
}

nlohmann::json grammar_masks_json(const GrammarMaskCost& g) {
  return {{"tokens", g.tokens},
          {"sentences", g.sentences},
          {"cold_tokens", g.cold_tokens},
          {"cold_matcher_ms", g.cold_matcher_ms},
          {"warm_tokens", g.warm_tokens},
          {"warm_matcher_ms", g.warm_matcher_ms},
          {"masked_sample_ms", g.masked_sample_ms},
          {"plain_sample_ms", g.plain_sample_ms},
          {"cold_ms_per_token", g.cold_ms()},
          {"warm_ms_per_token", g.warm_ms()},
          {"step_ms", g.step_ms},
          {"contexts", g.contexts},
          {"context_walk_ms", g.context_walk_ms}};
}

void add_optional_runs(nlohmann::json& j, const OptionalRuns& o) {
  if (!o.streams.empty()) j["streams"] = streams_json(o.streams);
  if (o.speculative) j["speculative"] = spec_bench_json(*o.speculative);
  if (!o.turns_cached.empty())
    j["chat_turns"] = {{"with_prefix_cache", turns_json(o.turns_cached)}, {"without", turns_json(o.turns_cold)}};
  if (o.masks) j["grammar_masks"] = grammar_masks_json(*o.masks);
  if (o.vision) j["vision"] = vision_bench_json(*o.vision);
}

}  // namespace

void write_bench_json(const std::string& path, const std::string& weights_flag, const BenchRig& r,
                      const BenchResults& res, const BenchFigures& fig) {
  nlohmann::json j = nlohmann::json::object();
  add_setup(j, weights_flag, r, fig);
  add_prefill_and_decode(j, r, res, fig);
  add_rooflines_and_machine(j, r, res, fig);
  add_optional_runs(j, res.optional);
  std::ofstream(path) << j.dump(2) << "\n";
  std::fprintf(stderr, "[bench] wrote %s\n", path.c_str());
}

}  // namespace g4::cli
