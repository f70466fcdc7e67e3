#include "cli/bench_grammar.h"

#include <algorithm>
#include <chrono>

#include "engine/sampler.h"
#include "model/forward_cached.h"

namespace g4::cli {

using Clock = std::chrono::steady_clock;

GrammarMaskCost measure_grammar_masks(const Model& model, KvCache& kv, const blocks::Exec& ex,
                                      const std::shared_ptr<grammar::CompiledGrammar>& grammar,
                                      const std::vector<int>& stop_token_ids, int first_token, int64_t tokens) {
  GrammarMaskCost r;
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 1;
  Sampler sampler(sp, model.config.vocab_size), plain(sp, model.config.vocab_size);
  auto matcher = std::make_unique<grammar::GrammarMatcher>(grammar);
  grammar::TokenMask mask;
  std::vector<float> logits;
  const int seq = kv.add_sequence();
  int tok = first_token;
  double step_s = 0, cold_s = 0, warm_s = 0, masked_s = 0, plain_s = 0;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  for (int64_t t = 0; t < tokens; ++t) {
    const auto t0 = Clock::now();
    forward_cached(model, {{seq, kv.length(seq), tok, true}}, kv, ex, logits);
    const auto t1 = Clock::now();
    matcher->fill_mask(mask, stop_token_ids);
    const auto t2 = Clock::now();
    tok = sampler.sample(logits.data(), {}, {}, &mask).token;
    const auto t3 = Clock::now();
    (void)plain.sample(logits.data(), {}, {}, nullptr);
    const auto t4 = Clock::now();
    const bool stop = std::find(stop_token_ids.begin(), stop_token_ids.end(), tok) != stop_token_ids.end();
    if (!stop) matcher->accept(tok);
    const bool complete = stop || (matcher->can_end() && !matcher->can_continue());
    const auto t5 = Clock::now();
    step_s += seconds(t0, t1);
    masked_s += seconds(t2, t3);
    plain_s += seconds(t3, t4);
    const double matcher_s = seconds(t1, t2) + seconds(t4, t5);
    if (r.sentences == 0) {
      cold_s += matcher_s;
      ++r.cold_tokens;
    } else {
      warm_s += matcher_s;
      ++r.warm_tokens;
    }
    if (complete) {
      ++r.sentences;
      matcher = std::make_unique<grammar::GrammarMatcher>(grammar);
    }
  }
  kv.free_sequence(seq);
  const double n = double(std::max<int64_t>(1, tokens));
  r.tokens = tokens;
  r.step_ms = 1e3 * step_s / n;
  r.masked_sample_ms = 1e3 * masked_s / n;
  r.plain_sample_ms = 1e3 * plain_s / n;
  r.cold_matcher_ms = 1e3 * cold_s / double(std::max<int64_t>(1, r.cold_tokens));
  r.warm_matcher_ms = r.warm_tokens ? 1e3 * warm_s / double(r.warm_tokens) : 0;
  r.contexts = int64_t(grammar->stats().contexts);
  r.context_walk_ms = 1e3 * grammar->stats().context_walk_seconds;
  return r;
}

}  // namespace g4::cli
