#include "engine/engine.h"

#include <algorithm>
#include <exception>

#include "engine/engine_sequence.h"
#include "model/forward_cached.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4 {

namespace {

// Rollback after a verify step forgets up to k_max positions; the drafter reads W + 1.
KvCacheOptions with_ring_room(KvCacheOptions kv, const SpeculativeOptions& spec) {
  kv.ring_extra_slots = std::max<int64_t>(kv.ring_extra_slots, int64_t(spec.k_max) + 1);
  return kv;
}

}  // namespace

Engine::Engine(const Model& model, EngineOptions o, TextStreamFactory text)
    : model_(model), opts_(o), text_(std::move(text)), kv_(model.config, with_ring_room(o.kv, o.speculative)) {
  // A checkpoint truncated after load_model validated it is refused here, before any weight is
  // read (a read past the end of a shrunken mapping is SIGBUS, not an error).
  model.check_unchanged();
  if (opts_.max_seqs < 1) throw Error("engine: max_seqs must be >= 1");
  if (opts_.threads < 0) throw Error("engine: threads must be >= 0");
  if (opts_.threads > 0) {
    pool_ = std::make_unique<ThreadPool>(opts_.threads);
    // Refuses with the arithmetic when no tiling fits this CPU's caches.
    matmul_ = ops::make_matmul_context(pool_.get(), host_cpu(),
                                       std::max({model.config.widest_matmul_input(), opts_.min_matmul_input,
                                                 o.vision ? o.vision->config.widest_matmul_input() : int64_t(0)}),
                                       opts_.bf16_compute, opts_.int8_activations);
  }
  if (opts_.prefill_chunk < 1) throw Error("engine: prefill_chunk must be >= 1");
  if (opts_.speculative.k_max < 1 || opts_.speculative.k_max > 16)
    throw Error("engine: draft k_max " + std::to_string(opts_.speculative.k_max) + " is outside 1..16");
  if (opts_.prefix_cache_bytes > 0)
    prefix_ = std::make_unique<PrefixCache>(kv_, opts_.prefix_cache_bytes, opts_.prefix_cache_min_tokens);
  if (opts_.vision && opts_.image_cache_bytes > 0) image_cache_ = std::make_unique<ImageEncoderCache>(opts_.image_cache_bytes);
  if (opts_.device && opts_.kv.dtype != KvDType::F32)
    throw Error("engine: the KV cache of a device run must be f32 (the host's exact copy of the device's keys and "
                "values), not " + std::string(kv_dtype_name(opts_.kv.dtype)));
  if (opts_.device && opts_.vision)
    throw Error("engine: image input runs on the CPU only; " + opts_.device->name() + " runs text");
  if (opts_.device) opts_.device->attach(kv_);
  if (opts_.max_batch_tokens < opts_.max_seqs)
    throw Error("engine: max_batch_tokens (" + std::to_string(opts_.max_batch_tokens) + ") must be >= max_seqs (" +
                std::to_string(opts_.max_seqs) + ")");
}

Engine::~Engine() { prefix_.reset(); }  // its entries live in kv_

int Engine::submit(GenerationRequest r, EventCallback cb) {
  const ModelConfig& c = model_.config;
  if (r.prompt.empty()) throw Error("request: the prompt has no tokens");
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= c.vocab_size)
      throw Error("request: prompt token " + std::to_string(r.prompt[i]) + " at index " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  r.sampling.validate(c.vocab_size);
  check_images(r);
  if (r.speculative.value_or(opts_.speculative.mode) == SpecMode::Draft && !opts_.speculative.make_drafter)
    throw Error("request: speculative \"draft\" needs a drafter model, and this engine has none (--draft-model)");
  if (r.draft_k < 0 || r.draft_k > opts_.speculative.k_max)
    throw Error("request: draft_k " + std::to_string(r.draft_k) + " is outside 0.." + std::to_string(opts_.speculative.k_max) +
                " (the engine's --draft-k)");
  if (r.n < 1 || r.n > opts_.max_seqs)
    throw Error("request: n = " + std::to_string(r.n) + " choices; each needs a running slot and this engine runs 1 to " +
                std::to_string(opts_.max_seqs) + " sequences at once (max_seqs)");
  const int64_t limit = std::min<int64_t>(opts_.max_context, c.max_position_embeddings);
  if (int64_t(r.prompt.size()) >= limit)
    throw Error("request: prompt of " + std::to_string(r.prompt.size()) + " tokens does not fit the context of " +
                std::to_string(limit) + " tokens");
  if (int64_t(r.prompt.size()) + r.sampling.max_tokens > limit)
    r.sampling.max_tokens = int(limit - int64_t(r.prompt.size()));  // generation stops at the context edge ("length")
  auto s = std::make_unique<Sequence>();
  s->req = std::move(r);
  s->cb = std::move(cb);
  s->submitted = Clock::now();
  s->slots = s->req.n;
  std::lock_guard<std::mutex> lock(mu_);
  s->id = next_id_++;
  const int id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

void Engine::cancel(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.push_back(id);
}

int Engine::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_count_;
}
int Engine::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int(waiting_.size());
}
uint64_t Engine::kv_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_bytes_;
}
int64_t Engine::prefilled_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefilled_;
}
PrefixCacheStats Engine::prefix_cache_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefix_stats_;
}

bool Engine::make_room(int64_t blocks) {
  while (kv_.free_blocks() < blocks)
    if (!prefix_ || !prefix_->evict_one()) return false;
  return true;
}

namespace {

// The finished event of a sequence that never produced a token, once per choice it stands for.
void finish_unstarted(int id, int choices, const EventCallback& cb, const std::string& reason, const std::string& error) {
  for (int i = 0; i < choices; ++i) {
    GenerationEvent ev;
    ev.request_id = id;
    ev.choice = i;
    ev.finished = true;
    ev.finish_reason = reason;
    ev.error = error;
    cb(ev);
  }
}

}  // namespace

int Engine::slots_in_use() const {
  int n = 0;
  for (const auto& s : running_)
    if (!s->done) n += s->slots;
  return n;
}

void Engine::start_state(Sequence& s) {
  s.sampler = std::make_unique<Sampler>(s.req.sampling, model_.config.vocab_size);
  s.stops = std::make_unique<StopMatcher>(s.req.sampling);
  s.guard = std::make_unique<DegeneracyGuard>(s.req.prompt);
  if (text_) s.text = text_();
  if (s.req.grammar) s.matcher = std::make_unique<grammar::GrammarMatcher>(s.req.grammar);
  const SpecMode mode = s.req.speculative.value_or(opts_.speculative.mode);
  s.draft_k = s.req.draft_k > 0 ? s.req.draft_k : opts_.speculative.k_max;
  if (mode == SpecMode::Ngram) s.drafter = std::make_unique<NgramDrafter>();
  if (mode == SpecMode::Draft) s.drafter = opts_.speculative.make_drafter(s.req, s.choice);
  if (s.drafter) s.draft_length = std::make_unique<DraftLength>(s.draft_k);
}

// Called once the prompt is in the cache and its logits are out, before the first sample: the
// other n - 1 choices become sequences of their own over copies of the prompt's KV.
bool Engine::fork_choices(Sequence& s) {
  std::vector<std::unique_ptr<Sequence>> clones;
  for (int i = 1; i < s.slots; ++i) {
    int kv_seq = -1;
    try {
      kv_seq = kv_.fork_sequence(s.kv_seq);
    } catch (const Error& e) {
      for (auto& c : clones) kv_.free_sequence(c->kv_seq);
      finish(s, "error", e.what());  // emits a finished event for every choice
      return false;
    }
    auto c = std::make_unique<Sequence>();
    c->id = s.id;
    c->choice = i;
    c->req = s.req;
    c->req.sampling.seed = s.req.sampling.seed + uint64_t(i);
    c->cb = s.cb;
    c->kv_seq = kv_seq;
    c->fed = s.fed;
    c->cached = s.cached;
    c->hidden = s.hidden;
    c->submitted = s.submitted;
    c->admitted = s.admitted;
    start_state(*c);
    clones.push_back(std::move(c));
  }
  s.slots = 1;
  for (auto& c : clones) running_.push_back(std::move(c));
  return true;
}

void Engine::admit_locked() {
  while (!waiting_.empty() && slots_in_use() + waiting_.front()->slots <= opts_.max_seqs) {
    Sequence& s = *waiting_.front();
    const int64_t need = int64_t(s.req.prompt.size()) + 1;
    // Room for the prompt, and for its copies when it has several choices; cached prefixes give
    // way to requests.
    if (!make_room(kv_.blocks_for(need) * s.slots)) {
      if (!running_.empty()) break;  // wait for memory unless nothing else could free it
      auto owned = std::move(waiting_.front());
      waiting_.erase(waiting_.begin());
      finish_unstarted(owned->id, owned->slots, owned->cb, "error",
                       "the KV cache cannot hold a prompt of " + std::to_string(owned->req.prompt.size()) + " tokens" +
                           (owned->slots > 1 ? " " + std::to_string(owned->slots) + " times (n)" : ""));
      continue;
    }
    int kv_seq = -1;
    if (prefix_) {
      if (!s.req.images.empty()) s.prefix_keys = prefix_keys(s.req.prompt, s.req.images);
      const PrefixCache::Hit hit = prefix_->lookup(s.prefix_keys.empty() ? s.req.prompt : s.prefix_keys);
      kv_seq = hit.kv_seq;
      s.fed = s.cached = hit.tokens;
    }
    if (kv_seq < 0) kv_seq = kv_.add_sequence(/*history=*/prefix_ != nullptr);
    s.kv_seq = kv_seq;
    s.admitted = Clock::now();
    start_state(s);
    running_.push_back(std::move(waiting_.front()));
    waiting_.erase(waiting_.begin());
  }
}

void Engine::finish(Sequence& s, const std::string& reason, const std::string& error, bool degenerate_stop) {
  if (s.done) return;
  s.done = true;
  GenerationEvent ev;
  ev.request_id = s.id;
  ev.choice = s.choice;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.stopped_degenerate = degenerate_stop;
  if (s.stops && !s.stops->finished()) {
    // Ended by the engine (cancel, degeneracy policy): release what the detokenizer and the
    // stop matcher still hold. A matcher that finished has already released or dropped it.
    std::string rest = s.text ? s.text->flush() : std::string();
    ev.text = s.stops->on_text(rest).text + s.stops->flush();
  }
  ev.verdict = s.guard ? s.guard->verdict() : DegeneracyVerdict{};
  ev.grammar_seconds = s.grammar_seconds;
  ev.grammar_masks = s.grammar_masks;
  ev.spec = s.spec;
  ev.prompt_tokens = int64_t(s.req.prompt.size());
  ev.cached_tokens = s.cached;
  for (const auto& img : s.req.images) {
    ev.image_tokens += img->span.count;
    const int64_t end = img->span.first + img->span.count;
    ev.image_tokens_prefilled += std::max<int64_t>(0, end - std::max(img->span.first, s.cached));
  }
  ev.vision_seconds = s.vision_seconds;
  ev.images_encoded = s.images_encoded;
  ev.image_cache_hits = s.image_cache_hits;
  ev.generated_tokens = int64_t(s.generated.size());
  const auto now = Clock::now();
  ev.queue_seconds = std::chrono::duration<double>(s.admitted - s.submitted).count();
  if (s.has_first_token) {
    ev.prefill_seconds = std::chrono::duration<double>(s.first_token - s.admitted).count();
    ev.decode_seconds = std::chrono::duration<double>(now - s.first_token).count();
    ev.ttft_seconds = std::chrono::duration<double>(s.first_token - s.submitted).count();
  }
  if (s.kv_seq >= 0) {
    // Ended inside a verify step: the rows past the last emitted token are not the sequence's.
    if (kv_.length(s.kv_seq) > s.fed) kv_.truncate(s.kv_seq, s.fed);
    // A sequence that ended normally leaves its KV to the prefix cache: the tokens it fed, one
    // per cached position (the last sampled token was never fed).
    if (prefix_ && (reason == "stop" || reason == "length")) {
      const int64_t prompt_len = int64_t(s.req.prompt.size()), fed = kv_.length(s.kv_seq);
      const std::vector<int>& keys = s.prefix_keys.empty() ? s.req.prompt : s.prefix_keys;
      std::vector<int> tokens(keys.begin(), keys.begin() + std::min(fed, prompt_len));
      for (int64_t i = 0; i + prompt_len < fed; ++i) tokens.push_back(s.generated[size_t(i)]);
      prefix_->insert(std::move(tokens), s.kv_seq);
    } else {
      kv_.free_sequence(s.kv_seq);
    }
  }
  s.kv_seq = -1;
  s.cb(ev);
  // Ended before its choices were forked: the others end the same way, with no tokens.
  for (int i = 1; i < s.slots; ++i) {
    GenerationEvent other = ev;
    other.choice = i;
    other.text.clear();
    other.generated_tokens = 0;
    s.cb(other);
  }
}

// Under the lock: drops cancelled requests that are still waiting and admits new ones; then
// ends the running sequences that were cancelled.
void Engine::cancel_and_admit() {
  std::vector<int> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled.swap(cancelled_);
    // Cancelled requests still waiting never start.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (std::find(cancelled.begin(), cancelled.end(), (*it)->id) != cancelled.end()) {
        finish_unstarted((*it)->id, (*it)->slots, (*it)->cb, "cancelled", "");
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    admit_locked();
  }
  for (auto& s : running_)
    if (std::find(cancelled.begin(), cancelled.end(), s->id) != cancelled.end()) finish(*s, "cancelled");
}

// Every decoding sequence gets one row, then prompts are prefilled in chunks with what is left of
// the token budget.
Engine::StepBatch Engine::build_batch() {
  StepBatch b;
  int64_t budget = opts_.max_batch_tokens;
  for (auto& sp : running_)
    if (!sp->done && sp->pending >= 0) --budget;  // every decoding sequence's own row comes first
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (s.done || s.pending < 0) continue;
    b.rows.push_back({s.kv_seq, s.fed, s.pending, true});
    b.owner.push_back(&s);
    if (s.drafter) add_drafts(s, b, budget);  // after it, from what the budget has left
  }
  for (auto& sp : running_) {
    Sequence& s = *sp;
    const int64_t prompt_len = int64_t(s.req.prompt.size());
    if (s.done || s.fed >= prompt_len || budget <= 0) continue;
    const int64_t n = prefill_rows(s, std::min({opts_.prefill_chunk, prompt_len - s.fed, budget}));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t pos = s.fed + k;
      BatchRow row{s.kv_seq, pos, s.req.prompt[size_t(pos)], pos + 1 == prompt_len};
      if (!s.req.images.empty()) row.soft = soft_span_at(s, pos);
      b.rows.push_back(row);
      b.owner.push_back(&s);
    }
    budget -= n;
    b.prompt_rows += n;
  }
  return b;
}

// The blocks this batch adds, all sequences together: cached prefixes give way to them.
// (Without a cache the pool holds max_seqs full contexts by construction.)
void Engine::make_room_for(const StepBatch& b) {
  int64_t need = 0;
  const Sequence* prev_owner = nullptr;
  for (size_t r = 0; r < b.rows.size(); ++r) {
    if (b.owner[r] == prev_owner) continue;
    prev_owner = b.owner[r];
    int64_t last = b.rows[r].pos;
    for (size_t q = r; q < b.rows.size() && b.owner[q] == prev_owner; ++q) last = b.rows[q].pos;
    need += kv_.blocks_needed(prev_owner->kv_seq, last + 1);
  }
  make_room(need);
}

// Runs the batch through the model, advances each sequence past its rows and samples from every
// row that wants logits (forking a request's choices once its prompt is in).
void Engine::run_batch(const StepBatch& b) {
  blocks::Exec ex;
  if (pool_) ex.matmul = &matmul_;
  ex.times = opts_.step_times;
  std::vector<float>& logits = logits_;  // kept across steps: no zero-fill of fresh storage
  bool want_hidden = false;
  for (const Sequence* s : b.owner) want_hidden = want_hidden || (s->drafter && s->drafter->needs_hidden());
  if (opts_.device)
    opts_.device->forward(b.rows, kv_, logits, want_hidden ? &hidden_ : nullptr);
  else
    forward_cached(model_, b.rows, kv_, ex, logits, want_hidden ? &hidden_ : nullptr);
  const int64_t V = model_.config.vocab_size, H = model_.config.hidden_size;
  size_t out_row = 0;
  Sequence* prev = nullptr;
  for (size_t r = 0; r < b.rows.size(); ++r) {
    Sequence& s = *b.owner[r];
    if (&s != prev) {
      // Rows of one sequence are contiguous; advance its fed count once per run.
      int64_t n = 0;
      for (size_t q = r; q < b.rows.size() && b.owner[q] == &s; ++q) ++n;
      if (!s.drafts.empty()) {  // a pending token and its drafts: every row wants logits
        verify_and_emit(s, &logits[out_row * size_t(V)], want_hidden ? &hidden_[out_row * size_t(H)] : nullptr,
                        size_t(n));
        out_row += size_t(n);
        r += size_t(n) - 1;
        prev = &s;
        continue;
      }
      s.fed += n;
      if (s.pending >= 0) {
        s.generated.push_back(s.pending);
        s.pending = -1;
      }
      prev = &s;
    }
    if (!b.rows[r].want_logits) continue;
    if (want_hidden) keep_hidden(s, &hidden_[out_row * size_t(H)]);
    const float* l = &logits[out_row++ * size_t(V)];
    if (s.slots > 1) {  // the prompt of a request with several choices is in: fork them
      const size_t first_clone = running_.size();
      if (!fork_choices(s)) continue;
      sample_and_emit(s, l);
      for (size_t c = first_clone; c < running_.size(); ++c) sample_and_emit(*running_[c], l);
      continue;
    }
    sample_and_emit(s, l);
  }
}

bool Engine::step() {
  cancel_and_admit();
  const StepBatch batch = build_batch();
  if (prefix_) make_room_for(batch);
  std::exception_ptr failed;
  if (!batch.rows.empty()) {
    try {
      run_batch(batch);
    } catch (const std::exception& e) {
      // A step that failed (a device lost or out of its memory, a fault in a kernel): its
      // sequences end with the error instead of waiting for a step that may never come, the
      // engine stays usable, and the caller hears of it (the server's /ready reports it).
      for (Sequence* s : batch.owner) finish(*s, "error", std::string("the step failed: ") + e.what());
      failed = std::current_exception();
    }
  }
  // Drop finished sequences.
  running_.erase(std::remove_if(running_.begin(), running_.end(), [](const auto& s) { return s->done; }), running_.end());
  std::lock_guard<std::mutex> lock(mu_);
  running_count_ = int(running_.size());
  prefilled_ += batch.prompt_rows;
  if (prefix_) prefix_stats_ = prefix_->stats();
  kv_bytes_ = 0;  // the live sequences' (blocks they share counted in each); the cache's is in its stats
  for (const auto& sp : running_)
    if (sp->kv_seq >= 0) kv_bytes_ += kv_.sequence_bytes(sp->kv_seq);
  if (failed) std::rethrow_exception(failed);
  return !batch.rows.empty() || !running_.empty() || !waiting_.empty();
}

}  // namespace g4
