// Speculative decoding inside the engine's step: a decoding sequence's pending token and its
// drafts are fed as consecutive rows of one batch; then its rows are sampled in order exactly as
// plain decoding would sample them, one token per row, for as long as each sampled token equals
// the draft fed after it. Every emitted token therefore comes from the logits, sampler state and
// stop/grammar/guard checks plain decoding gives it (rows of a batch are bit-identical to the
// same tokens fed one at a time: docs/numerics.md); the cache forgets the rows past the last
// token fed.
#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_sequence.h"

namespace g4 {

void Engine::add_drafts(Sequence& s, StepBatch& b, int64_t& budget) {
  // Tokens plain decoding may still emit after the pending one; a draft beyond them is wasted.
  const int64_t left = int64_t(s.req.sampling.max_tokens) - s.stops->tokens_seen() - 1;
  const int64_t k = std::min<int64_t>({s.draft_length->next(), left, budget});
  if (k <= 0) return;
  const auto t0 = Clock::now();
  blocks::Exec ex;
  if (pool_) ex.matmul = &matmul_;
  DraftContext ctx{s.req.prompt, s.generated, s.pending};
  if (s.drafter->needs_hidden()) {
    if (s.hidden.empty()) return;  // no row chose the pending token yet
    ctx.kv = &kv_;
    ctx.kv_seq = s.kv_seq;
    ctx.hidden = s.hidden;
    ctx.exec = &ex;
  }
  std::vector<int> d = s.drafter->propose(ctx, int(k));
  s.spec.draft_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (int64_t(d.size()) > k) d.resize(size_t(k));
  if (d.empty() && s.drafter->costly()) s.draft_length->observe_unsure();
  const int V = int(model_.config.vocab_size);
  for (size_t j = 0; j < d.size(); ++j) {
    if (d[j] < 0 || d[j] >= V) {  // a drafter bug must not become an out-of-range embedding read
      d.resize(j);
      break;
    }
    b.rows.push_back({s.kv_seq, s.fed + 1 + int64_t(j), d[j], true});
    b.owner.push_back(&s);
  }
  budget -= int64_t(d.size());
  s.drafts = std::move(d);
}

void Engine::keep_hidden(Sequence& s, const float* row) {
  if (s.drafter && s.drafter->needs_hidden()) s.hidden.assign(row, row + model_.config.hidden_size);
}

void Engine::verify_and_emit(Sequence& s, const float* logits, const float* hidden, size_t n) {
  const int64_t V = model_.config.vocab_size;
  const std::vector<int> drafts = std::move(s.drafts);
  s.drafts.clear();
  // Counted as they happen: the sequence may finish (and report them) inside the loop.
  SpeculationStats& st = s.spec;
  ++st.verify_steps;
  st.drafted += int64_t(drafts.size());
  if (st.drafted_at.size() < drafts.size()) st.drafted_at.resize(drafts.size(), 0);
  if (st.accepted_at.size() < drafts.size()) st.accepted_at.resize(drafts.size(), 0);
  for (size_t j = 0; j < drafts.size(); ++j) ++st.drafted_at[j];
  int accepted = 0;
  for (size_t j = 0; j < n; ++j) {
    if (j > 0) {
      // Row j was fed drafts[j - 1]; it stands only if that is the token just sampled.
      if (s.done || s.pending != drafts[j - 1]) break;
      ++accepted;
      ++st.accepted;
      ++st.accepted_at[j - 1];
    }
    s.fed += 1;
    s.generated.push_back(s.pending);
    s.pending = -1;
    if (hidden) keep_hidden(s, hidden + j * size_t(model_.config.hidden_size));
    sample_and_emit(s, logits + j * size_t(V));
  }
  if (!s.done) {
    kv_.truncate(s.kv_seq, s.fed);  // rows past the last fed token (finish() did it if done)
    s.draft_length->observe(int(drafts.size()), accepted);
  }
}

}  // namespace g4
