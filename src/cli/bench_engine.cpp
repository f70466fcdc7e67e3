#include "cli/bench_engine.h"

#include <algorithm>
#include <chrono>

namespace g4::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> synthetic_tokens(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int(4 + (uint64_t(i) * 7919 + salt * 104729) % uint64_t(vocab - 4));
  return t;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

}  // namespace

StreamsResult bench_streams(const Model& model, EngineOptions o, int streams, int64_t prompt_len, int64_t gen) {
  o.max_seqs = std::max(o.max_seqs, streams);
  o.max_batch_tokens = std::max<int64_t>(o.max_batch_tokens, o.prefill_chunk + streams);
  o.prefix_cache_bytes = 0;  // every stream prefills its own prompt
  blocks::StepTimes times;
  o.step_times = &times;
  Engine eng(model, o);
  struct Track {
    std::vector<Clock::time_point> at;
  };
  std::vector<Track> tracks(static_cast<size_t>(streams));
  for (int s = 0; s < streams; ++s) {
    GenerationRequest r;
    r.prompt = synthetic_tokens(prompt_len, model.config.vocab_size, uint64_t(s) + 1);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = int(gen);
    eng.submit(std::move(r), [&tracks, s](const GenerationEvent& e) {
      if (!e.tokens.empty()) tracks[size_t(s)].at.push_back(Clock::now());
    });
  }
  // Prefill until every stream has its first token; the steps after that are the decode phase.
  auto all_started = [&tracks] {
    for (const Track& t : tracks)
      if (t.at.empty()) return false;
    return true;
  };
  while (!all_started() && eng.step()) {
  }
  const blocks::StepTimes at_start = times;
  const Clock::time_point steps_from = Clock::now();
  int64_t steps = 0;
  while (eng.step()) ++steps;
  const double steps_s = std::chrono::duration<double>(Clock::now() - steps_from).count();
  // The decode phase: from the moment every stream has its first token to the last token.
  Clock::time_point start = Clock::time_point::min(), end = Clock::time_point::min();
  int64_t tokens = 0;
  std::vector<double> gaps;
  for (const Track& t : tracks) {
    if (t.at.empty()) continue;
    start = std::max(start, t.at.front());
    end = std::max(end, t.at.back());
  }
  for (const Track& t : tracks)
    for (size_t i = 1; i < t.at.size(); ++i)
      if (t.at[i] > start) {
        ++tokens;
        gaps.push_back(std::chrono::duration<double, std::milli>(t.at[i] - t.at[i - 1]).count());
      }
  StreamsResult r;
  r.streams = streams;
  const double seconds = std::chrono::duration<double>(end - start).count();
  r.aggregate_tok_s = seconds > 0 ? double(tokens) / seconds : 0;
  r.per_stream_tok_s = r.aggregate_tok_s / streams;
  r.inter_token_ms_median = percentile(gaps, 0.5);
  r.inter_token_ms_p90 = percentile(gaps, 0.9);
  r.decode_steps = steps;
  if (steps > 0) {
    const double per = 1e3 / double(steps);
    r.step_ms = steps_s * per;
    r.products_ms = (times.weight_products_s - at_start.weight_products_s) * per;
    r.attention_ms = (times.attention_s - at_start.attention_s) * per;
  }
  return r;
}

std::vector<ChatTurn> bench_chat_turns(const Model& model, EngineOptions o, int turns, int64_t system_len,
                                       int64_t message_len, int64_t answer_len) {
  o.max_seqs = 1;
  Engine eng(model, o);
  std::vector<int> conversation = synthetic_tokens(system_len, model.config.vocab_size, 1000);
  std::vector<ChatTurn> out;
  for (int t = 0; t < turns; ++t) {
    for (int tok : synthetic_tokens(message_len, model.config.vocab_size, 2000 + uint64_t(t))) conversation.push_back(tok);
    GenerationRequest r;
    r.prompt = conversation;
    r.sampling.temperature = 0;
    r.sampling.max_tokens = int(answer_len);
    std::vector<int> answer;
    GenerationEvent last;
    eng.submit(std::move(r), [&](const GenerationEvent& e) {
      for (const auto& tk : e.tokens) answer.push_back(tk.token);
      if (e.finished) last = e;
    });
    eng.run_until_idle();
    out.push_back({last.prompt_tokens, last.cached_tokens, last.ttft_seconds});
    conversation.insert(conversation.end(), answer.begin(), answer.end());
  }
  return out;
}

}  // namespace g4::cli
