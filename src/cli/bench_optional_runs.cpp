#include "cli/bench_optional_runs.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/output_grammar.h"
#include "cli/speculative_args.h"
#include "engine/model_text.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

GrammarMaskCost grammar_masks(const Args& a, BenchRig& r) {
  const Model& model = *r.model;
  const std::optional<text::Tokenizer> tok = load_model_tokenizer(model, std::nullopt);
  if (!tok) throw Error(model.path.string() + ": --json-schema, --json-object and --grammar need the model's tokenizer");
  const text::StopTokens stops = model_stop_tokens(model, &tok->vocab());
  text::EncodeOptions with_bos;
  with_bos.add_bos = true;
  const auto bos = tok->encode("", with_bos);
  std::fprintf(stderr, "[bench] decoding %lld tokens under the grammar ...\n", (long long)r.flags.gen);
  return measure_grammar_masks(model, *r.kv, r.ex, compile_output_grammar(a, *tok),
                               std::vector<int>(stops.ids.begin(), stops.ids.end()), bos.empty() ? 0 : int(bos[0]),
                               r.flags.gen);
}

// The engine on the bench's model, as g4 serve would run it.
EngineOptions engine_options_of(const BenchRig& r) {
  const bool reference = r.flags.reference;
  EngineOptions o;
  o.threads = reference ? 0 : r.flags.threads;
  o.bf16_compute = !reference && r.compute.bf16;
  o.int8_activations = !reference && r.compute.int8;
  o.kv.dtype = r.kv_options.dtype;
  o.max_context = r.model->config.max_position_embeddings;
  o.kv.max_total_tokens = int64_t(1) << 18;
  return o;
}

std::vector<StreamsRounds> streams_runs(const std::string& list, const BenchRig& r, const EngineOptions& o) {
  const std::vector<int> counts = parse_int_list(list, "--streams");
  std::vector<StreamsRounds> out;
  for (int n : counts) {
    if (n < 1 || n > 256) throw Error("--streams: each count must be in 1..256, got " + std::to_string(n));
    out.push_back({n, {}, {}});
  }
  const auto one = std::find(counts.begin(), counts.end(), 1);
  for (int64_t round = 0; round < r.flags.repeat; ++round) {
    for (StreamsRounds& c : out) {
      std::fprintf(stderr, "[bench] round %lld: %d stream(s) decoding %lld tokens each ...\n", (long long)round + 1,
                   c.streams, (long long)r.flags.gen);
      c.rounds.push_back(bench_streams(*r.model, o, c.streams, 64, r.flags.gen));
    }
    if (one == counts.end()) continue;
    const double base = out[size_t(one - counts.begin())].rounds.back().aggregate_tok_s;
    for (StreamsRounds& c : out) c.gains.push_back(base > 0 ? c.rounds.back().aggregate_tok_s / base : 0.0);
  }
  return out;
}

// A --prompt-len opening, 32-token messages and 16-token answers, with the prefix cache and without.
void chat_turn_runs(const Args& a, const std::string& flag_value, const BenchRig& r, const EngineOptions& o,
                    OptionalRuns& out) {
  const int turns = int(a.get_int("--chat-turns", 10));
  if (turns < 2 || turns > 100) throw Error("--chat-turns must be in 2..100, got " + flag_value);
  EngineOptions with_cache = o;
  with_cache.prefix_cache_bytes = uint64_t(1) << 30;
  std::fprintf(stderr, "[bench] a %d-turn chat with the prefix cache, then without ...\n", turns);
  out.turns_cached = bench_chat_turns(*r.model, with_cache, turns, r.flags.prompt_len, 32, 16);
  out.turns_cold = bench_chat_turns(*r.model, o, turns, r.flags.prompt_len, 32, 16);
}

}  // namespace

OptionalRuns run_optional(const Args& a, bool grammar_run, BenchRig& rig) {
  OptionalRuns out;
  if (grammar_run) out.masks = grammar_masks(a, rig);
  const EngineOptions options = engine_options_of(rig);
  if (auto list = a.get("--streams")) out.streams = streams_runs(*list, rig, options);
  if (auto t = a.get("--chat-turns")) chat_turn_runs(a, *t, rig, options, out);
  const SpeculativeSetup spec = speculative_setup(a, *rig.model);
  if (spec.options.mode != SpecMode::Off) {
    EngineOptions with_drafter = options;
    with_drafter.speculative = spec.options;
    with_drafter.min_matmul_input = spec.min_matmul_input;
    out.speculative = bench_speculative(rig, with_drafter, spec.options.mode, spec.options.k_max);
  }
  if (wants_vision_bench(a)) out.vision = run_vision_bench(a, rig, options);
  return out;
}

}  // namespace g4::cli
