// One sampled token's way from the logits to the request's callback: the grammar's mask, the
// sampler, then the detokenizer, stop matcher and degeneracy guard (the scheduler is engine.cpp).
#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_sequence.h"

namespace g4 {

// The grammar's mask for the next sample, or null when it allows nothing (the sequence ended).
const grammar::TokenMask* Engine::grammar_mask(Sequence& s) {
  const auto mask_start = Clock::now();
  s.matcher->fill_mask(s.mask, s.req.sampling.stop_token_ids);
  ++s.grammar_masks;
  s.grammar_seconds += std::chrono::duration<double>(Clock::now() - mask_start).count();
  if (s.mask.count() == 0) {
    finish(s, "error", "the grammar allows no token here (the vocabulary cannot spell its next symbol)");
    return nullptr;
  }
  return &s.mask;
}

// Advances the grammar past a sampled token; false when the sequence ended on an error.
// `complete`: nothing can follow the output any more.
bool Engine::accept_in_grammar(Sequence& s, int token, bool& complete) {
  const auto& stop_ids = s.req.sampling.stop_token_ids;
  const auto accept_start = Clock::now();
  const bool is_stop = std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
  if (!is_stop && !s.matcher->accept(token)) {
    finish(s, "error", "internal: sampled token " + std::to_string(token) + " outside the grammar's mask");
    return false;
  }
  complete = !is_stop && s.matcher->can_end() && !s.matcher->can_continue();
  s.grammar_seconds += std::chrono::duration<double>(Clock::now() - accept_start).count();
  return true;
}

namespace {

// A sampled token's text, as the detokenizer releases it, and what the stop matcher made of it.
struct ReleasedText {
  std::string piece;  // the detokenizer's output (what the degeneracy guard watches)
  StopUpdate update;  // the text safe to show, and whether a stop ended the sequence
};

// The detokenizer may hold an unfinished byte-fallback run; it must reach the output when the
// sequence ends here, whether on a stop token (whose own text is never shown) or on the last
// allowed token, and it must still pass through the stop-string matcher.
ReleasedText release_text(TokenTextStream* text, StopMatcher& stops, int token, bool stop_id, bool last_allowed) {
  ReleasedText r;
  if (text) r.piece = stop_id ? text->flush() : text->push(token);
  if (text && last_allowed && !stop_id) r.piece += text->flush();
  if (stop_id) {
    StopUpdate held = stops.on_text(r.piece);
    if (held.finished) {
      r.update = std::move(held);  // a stop string completed inside the released text
    } else {
      r.update = stops.on_token(token, "");
      r.update.text = held.text + r.update.text;
    }
  } else {
    r.update = stops.on_token(token, r.piece);
  }
  return r;
}

}  // namespace

// Masks (grammar), samples one token from `l` ([V] logits), and passes it through the text stream,
// stop matcher and degeneracy guard to the request's callback; ends the sequence when it is done.
void Engine::sample_and_emit(Sequence& s, const float* l) {
  const grammar::TokenMask* allowed = nullptr;
  if (s.matcher) {
    allowed = grammar_mask(s);
    if (!allowed) return;
  }
  const SampleResult res = s.sampler->sample(l, s.req.prompt, s.generated, allowed);
  bool grammar_done = false;
  if (s.matcher && !accept_in_grammar(s, res.token, grammar_done)) return;
  GenerationEvent ev;
  ev.request_id = s.id;
  ev.choice = s.choice;
  ev.tokens.push_back({res.token, res.logprob, res.top_logprobs});
  if (!s.has_first_token) {
    s.has_first_token = true;
    s.first_token = Clock::now();
  }
  const auto& stop_ids = s.req.sampling.stop_token_ids;
  const bool stop_id = std::find(stop_ids.begin(), stop_ids.end(), res.token) != stop_ids.end();
  const bool last_allowed = s.stops->tokens_seen() + 1 >= s.req.sampling.max_tokens;
  const ReleasedText released = release_text(s.text.get(), *s.stops, res.token, stop_id, last_allowed);
  const StopUpdate& up = released.update;
  const bool is_stop_token = stop_id && up.finished;
  if (!is_stop_token) s.guard->observe(res.token, released.piece);
  ev.text = up.text;
  if (up.finished) {
    s.generated.push_back(res.token);
    if (!ev.text.empty() || !ev.tokens.empty()) s.cb(ev);
    finish(s, std::string(finish_reason_name(up.reason)));
    return;
  }
  s.pending = res.token;
  if (grammar_done) {  // nothing can follow: the output is complete
    s.generated.push_back(res.token);
    s.pending = -1;
    s.cb(ev);
    finish(s, "stop");
    return;
  }
  if (s.req.stop_on_degenerate && s.guard->loop_certain()) {
    s.generated.push_back(res.token);
    s.pending = -1;
    s.cb(ev);
    finish(s, "stop", "", /*degenerate_stop=*/true);
    return;
  }
  s.cb(ev);
}

}  // namespace g4
