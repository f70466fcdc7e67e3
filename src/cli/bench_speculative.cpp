#include "cli/bench_speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"
#include "model/forward_cached.h"

namespace g4::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One sequence at `context` tokens; `runs` rounds of a step of 1 + k rows for every k (each
// rolled back after it), the k interleaved so that a host's drift spreads over all of them; one
// untimed round first (first touches of the rows' buffers).
std::vector<VerifyCost> time_verify_steps(BenchRig& r, int64_t context, int runs) {
  KvCache& kv = *r.kv;
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (int64_t p = 0; p < context; ++p) rows.push_back({seq, p, r.prompt[size_t(p) % r.prompt.size()], false});
  std::vector<float> logits;
  forward_cached(*r.model, rows, kv, r.ex, logits);
  std::vector<std::vector<double>> ms(9);
  for (int run = -1; run < runs; ++run) {
    for (int k = 0; k <= 8; ++k) {
      rows.clear();
      for (int j = 0; j <= k; ++j) rows.push_back({seq, context + j, r.prompt[size_t(j) % r.prompt.size()], true});
      const auto t0 = Clock::now();
      forward_cached(*r.model, rows, kv, r.ex, logits);
      if (run >= 0) ms[size_t(k)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      kv.truncate(seq, context);
    }
  }
  kv.free_sequence(seq);
  std::vector<VerifyCost> out;
  for (int k = 0; k <= 8; ++k) out.push_back({k, median(ms[size_t(k)])});
  return out;
}

struct Decoded {
  double tok_s = 0;
  SpeculationStats stats;
  std::vector<int> tokens;
};

Decoded decode_once(const Model& m, EngineOptions o, const std::vector<int>& prompt, int64_t gen) {
  Engine eng(m, o);
  GenerationRequest req;
  req.prompt = prompt;
  req.sampling.temperature = 0;
  req.sampling.max_tokens = int(gen);
  Decoded d;
  GenerationEvent last;
  eng.submit(req, [&](const GenerationEvent& e) {
    for (const auto& t : e.tokens) d.tokens.push_back(t.token);
    if (e.finished) last = e;
  });
  eng.run_until_idle();
  d.stats = last.spec;
  if (last.decode_seconds > 0 && last.generated_tokens > 1) d.tok_s = double(last.generated_tokens - 1) / last.decode_seconds;
  return d;
}

// A copy-heavy prompt: a 48-token passage, then the same passage twice more.
std::vector<int> copy_heavy_prompt(const Model& m) {
  std::vector<int> passage, p;
  for (int i = 0; i < 48; ++i) passage.push_back(int(4 + (uint64_t(i) * 104729 + 17) % uint64_t(m.config.vocab_size - 4)));
  for (int rep = 0; rep < 3; ++rep) p.insert(p.end(), passage.begin(), passage.end());
  return p;
}

}  // namespace

SpecBench bench_speculative(BenchRig& r, const EngineOptions& base, SpecMode mode, int k_max) {
  SpecBench b;
  b.mode = mode;
  b.k_max = k_max;
  b.context = std::min<int64_t>(r.flags.prompt_len, 512);
  std::fprintf(stderr, "[bench] verify steps of 1 + k rows at %lld tokens of context, k = 0..8 ...\n", (long long)b.context);
  b.verify = time_verify_steps(r, b.context, int(std::max<int64_t>(5, r.flags.repeat)));
  const std::vector<int> prompt = copy_heavy_prompt(*r.model);
  EngineOptions plain = base;
  plain.speculative.k_max = k_max;
  plain.max_seqs = 1;
  // The plain run's tokens are what the replay drafter proposes (greedy: the same every round).
  std::vector<int> script;
  // The mode's own drafter (the assistant model's, from base) unless `make` replaces it.
  auto with = [&](SpecMode m, std::function<std::unique_ptr<Drafter>()> make) {
    EngineOptions o = plain;
    o.speculative.mode = m;
    if (make) o.speculative.make_drafter = [make](const GenerationRequest&, int) { return make(); };
    return o;
  };
  const int vocab = int(r.model->config.vocab_size);
  b.decode = {{"plain", {}, {}, {}}, {std::string(spec_mode_name(mode)), {}, {}, {}}, {"replay (ceiling)", {}, {}, {}},
              {"random (nothing accepted)", {}, {}, {}}};
  for (int64_t round = 0; round < r.flags.repeat; ++round) {
    std::fprintf(stderr, "[bench] round %lld: plain, %s, replay and random drafts, %lld tokens each ...\n",
                 (long long)round + 1, spec_mode_name(mode), (long long)r.flags.gen);
    const Decoded p = decode_once(*r.model, plain, prompt, r.flags.gen);
    if (script.empty()) script = p.tokens;
    const Decoded runs[3] = {
        decode_once(*r.model, with(mode, nullptr), prompt, r.flags.gen),
        decode_once(*r.model, with(SpecMode::Draft, [&] { return std::make_unique<ReplayDrafter>(script); }), prompt, r.flags.gen),
        decode_once(*r.model, with(SpecMode::Draft, [&, round] { return std::make_unique<RandomDrafter>(vocab, unsigned(round)); }),
                    prompt, r.flags.gen)};
    b.decode[0].tok_s.push_back(p.tok_s);
    b.decode[0].vs_plain.push_back(1.0);
    for (int i = 0; i < 3; ++i) {
      SpecDecodeRounds& d = b.decode[size_t(i) + 1];
      d.tok_s.push_back(runs[i].tok_s);
      d.vs_plain.push_back(p.tok_s > 0 ? runs[i].tok_s / p.tok_s : 0);
      d.stats.add(runs[i].stats);
    }
  }
  return b;
}

void print_spec_bench(const SpecBench& b) {
  const double one = b.verify.empty() ? 0 : b.verify[0].step_ms;
  std::string line;
  for (const VerifyCost& v : b.verify) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%sk=%d %.2fx", line.empty() ? "" : ", ", v.k, one > 0 ? v.step_ms / one : 0);
    line += buf;
  }
  std::printf("  %-34s %10.2f ms  (one row at %lld tokens of context; 1 + k rows against it: %s)\n",
              "verify step, 1 row", one, (long long)b.context, line.c_str());
  for (const SpecDecodeRounds& d : b.decode) {
    const nlohmann::json s = speculation_json(d.stats);
    std::string acc;
    for (const auto& a : s["acceptance_at"]) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%s%.2f", acc.empty() ? "" : "/", a.get<double>());
      acc += buf;
    }
    std::printf("  %-34s %10.2f tok/s  (median of %zu rounds, runs %s; %.2fx plain in the same round, rounds %sx",
                ("decode, " + d.name).c_str(), median(d.tok_s), d.tok_s.size(), run_range(d.tok_s, 2).c_str(),
                median(d.vs_plain), run_range(d.vs_plain, 2).c_str());
    if (d.stats.verify_steps > 0)
      std::printf("; %.2f tokens per verify step, acceptance per draft position %s, k <= %d", s["tokens_per_step"].get<double>(),
                  acc.c_str(), b.k_max);
    std::printf(")\n");
  }
}

nlohmann::json spec_bench_json(const SpecBench& b) {
  nlohmann::json verify = nlohmann::json::array(), decode = nlohmann::json::array();
  for (const VerifyCost& v : b.verify)
    verify.push_back({{"k", v.k}, {"step_ms", v.step_ms}, {"vs_one_row", b.verify[0].step_ms > 0 ? v.step_ms / b.verify[0].step_ms : 0}});
  for (const SpecDecodeRounds& d : b.decode)
    decode.push_back({{"name", d.name}, {"tok_s", d.tok_s}, {"tok_s_median", median(d.tok_s)}, {"vs_plain", d.vs_plain},
                      {"vs_plain_median", median(d.vs_plain)}, {"speculation", speculation_json(d.stats)}});
  return {{"mode", spec_mode_name(b.mode)}, {"k_max", b.k_max}, {"context", b.context}, {"verify", verify}, {"decode", decode}};
}

}  // namespace g4::cli
