// Engine: continuous batching over the cached forward pass. Requests are admitted between steps;
// each step prefills new sequences in chunks and decodes one token for every running sequence,
// all in one batch, each row at its own absolute position (nothing is padded). Every generated
// token is sampled, checked against stop conditions, watched by the degeneracy guard and handed
// to the request's callback. Thread-safe submit/cancel; step() runs on one thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/degeneracy.h"
#include "engine/grammar_matcher.h"
#include "engine/image_cache.h"
#include "engine/kv_cache.h"
#include "engine/prefix_cache.h"
#include "engine/prompt_images.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "engine/stop_matcher.h"
#include "model/executor.h"
#include "model/model.h"
#include "model/soft_tokens.h"
#include "model/step_forward.h"
#include "model/vision_model.h"
#include "ops/matmul/matmul.h"
#include "platform/thread_pool.h"

namespace g4 {

// Turns token ids into text pieces as they stream (a UTF-8-safe detokenizer lives in text/).
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  virtual std::string push(int token) = 0;  // text completed by this token (may be empty)
  virtual std::string flush() = 0;          // whatever is still held at the end
};
using TextStreamFactory = std::function<std::unique_ptr<TokenTextStream>()>;

struct EngineOptions {
  int max_seqs = 8;             // sequences decoding at once
  int64_t prefill_chunk = 256;  // prompt tokens per sequence per step
  int64_t max_batch_tokens = 512;
  int64_t max_context = 8192;   // prompt + generated tokens per sequence
  KvCacheOptions kv;
  // 0: the f32 reference loops (the spec). N >= 1: the SIMD kernels on a pool of N threads.
  int threads = 0;
  // With threads >= 1: BF16 weights on the bf16 dot-product kernel (policy compute = bf16);
  // see ops::MatmulContext::bf16_compute.
  bool bf16_compute = false;
  // With threads >= 1: Q8_0/Q4_0 weights on the int8 kernel (policy activations = q8);
  // see ops::MatmulContext::int8_activations.
  bool int8_activations = false;
  // Prefix cache (prefix_cache.h): finished sequences' KV kept up to this many bytes, so a prompt
  // that starts with cached tokens prefills only the rest, with the same logits. 0: off.
  uint64_t prefix_cache_bytes = 0;
  int64_t prefix_cache_min_tokens = 16;  // shorter common prefixes are prefilled
  // Speculative decoding (speculative.h): the default mode, k_max and the drafter factory. The
  // rings keep k_max + 1 extra slots whatever the mode, so a request may turn it on.
  SpeculativeOptions speculative;
  // The kernels' tiling is planned for inputs this wide at least (a drafter model's widest
  // product may exceed the target's: AssistantConfig::widest_matmul_input).
  int64_t min_matmul_input = 0;
  // When set (g4 bench), every step adds its weight products' and attention's wall time here.
  blocks::StepTimes* step_times = nullptr;
  // The vision tower and projector beside the model (owned by the caller); null: requests with
  // images are refused.
  const VisionModel* vision = nullptr;
  // Encoder-output cache (image_cache.h): recent images' soft tokens kept up to this many bytes,
  // so an image sent again skips the tower even where the prefix cache misses. 0: off.
  uint64_t image_cache_bytes = uint64_t(64) << 20;
  // Where batches run (owned by the caller): null runs forward_cached on this CPU; a device
  // (gpu_model/gpu_step_forward.h) gets the same rows, and the KV cache (f32 only) is then the
  // host's copy of what the device wrote. Images stay on the CPU path.
  StepForward* device = nullptr;
};

struct GenerationRequest {
  std::vector<int> prompt;  // token ids exactly as fed (the template adds <bos>)
  SamplingParams sampling;
  bool stop_on_degenerate = false;  // end the sequence when a loop is certain
  // Constrained decoding: every sampled token keeps the output a prefix of the grammar, the stop
  // tokens are allowed only where it may end, and the sequence ends ("stop") as soon as nothing
  // more can follow. Null: unconstrained.
  std::shared_ptr<grammar::CompiledGrammar> grammar = nullptr;
  // Choices: the prompt is prefilled once, then its KV is copied into n sequences that decode
  // side by side. Choice i samples with seed + i, so it equals a request of n = 1 with that seed.
  // Each choice holds a running slot: 1 <= n <= max_seqs.
  int n = 1;
  // Speculative decoding for this request: nullopt takes the engine's mode; draft_k 0 its k_max.
  // The output is the same with and without (tokens, logprobs, seeded samples); only speed changes.
  std::optional<SpecMode> speculative = std::nullopt;
  int draft_k = 0;
  // Images whose soft tokens fill spans of the prompt (expand_image_placeholders), in prompt
  // order; each span's positions hold the model's image_token_id.
  std::vector<std::shared_ptr<const PromptImage>> images = {};
};

struct TokenInfo {
  int token = -1;
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
};

struct GenerationEvent {
  int request_id = 0;
  int choice = 0;                   // which of the request's n choices (0-based)
  std::string text;                 // text safe to show now (stop strings withheld)
  std::vector<TokenInfo> tokens;    // tokens sampled this step (0 or 1)
  bool finished = false;
  // Set when finished:
  std::string finish_reason;        // "stop", "length", "cancelled", "error"
  std::string error;                // finish_reason "error": why
  bool stopped_degenerate = false;  // ended early by the degeneracy policy
  DegeneracyVerdict verdict;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t cached_tokens = 0;        // prompt tokens restored from the prefix cache, not prefilled
  int64_t image_tokens = 0;         // prompt tokens that are images' soft tokens
  double vision_seconds = 0;        // in the vision tower and projector (0 for a prefix-cache hit)
  int64_t images_encoded = 0;       // images run through the tower for this request
  int64_t image_cache_hits = 0;     // images whose soft tokens came from the encoder cache
  int64_t image_tokens_prefilled = 0;  // of image_tokens, those prefilled (not from the prefix cache)
  double queue_seconds = 0, prefill_seconds = 0, decode_seconds = 0;  // decode: first token -> end
  double ttft_seconds = 0;  // submit -> first token
  double grammar_seconds = 0;  // time in the grammar matcher (masks and advancing; the sampler's
                               // use of the mask is part of sampling)
  int64_t grammar_masks = 0;   // how many masks were computed
  SpeculationStats spec;       // drafts proposed and accepted (zeros without speculation)
};
using EventCallback = std::function<void(const GenerationEvent&)>;

class Engine {
 public:
  Engine(const Model& model, EngineOptions options, TextStreamFactory text = nullptr);
  ~Engine();

  // Validates and queues a request (throws g4::Error for a bad one: empty prompt, prompt over the
  // context, invalid sampling). Returns its id. `on_event` runs on the thread calling step().
  int submit(GenerationRequest request, EventCallback on_event);
  void cancel(int request_id);  // finishes it with reason "cancelled" at the next step

  // One scheduler step. Returns false when there was nothing to do. When the forward pass
  // throws (a device lost), the step's sequences finish with reason "error" and the exception
  // is rethrown; the engine stays usable.
  bool step();
  void run_until_idle() {
    while (step()) {
    }
  }

  int running() const;
  int waiting() const;
  // Prompt tokens run through the forward pass since construction (choices share theirs; a
  // prefix-cache hit skips its tokens).
  int64_t prefilled_tokens() const;
  PrefixCacheStats prefix_cache_stats() const;  // zeros when the cache is off
  uint64_t kv_bytes_in_use() const;  // live sequences (the prefix cache's bytes are in its stats)
  const EngineOptions& options() const { return opts_; }
  const Model& model() const { return model_; }

 private:
  struct Sequence;
  void admit_locked();
  int slots_in_use() const;
  void start_state(Sequence& s);  // sampler, stop matcher, guard, text stream, grammar matcher
  bool fork_choices(Sequence& s);
  void sample_and_emit(Sequence& s, const float* logits);
  // Speculative decoding (engine_verify.cpp): drafts for a decoding sequence's rows, and the
  // verification of its pending token and drafts from their rows' logits ([rows, V]).
  struct StepBatch;
  void add_drafts(Sequence& s, StepBatch& b, int64_t& budget);
  void verify_and_emit(Sequence& s, const float* logits, const float* hidden, size_t rows);
  void keep_hidden(Sequence& s, const float* row);  // the row that chose s.pending, for its drafter
  const grammar::TokenMask* grammar_mask(Sequence& s);
  // Images (engine_images.cpp): checked at submit; a prefill chunk never splits an image whose
  // tokens see each other; a span's soft tokens are computed when its first row is scheduled.
  void check_images(const GenerationRequest& r) const;
  int64_t prefill_rows(const Sequence& s, int64_t n) const;
  const SoftSpan* soft_span_at(Sequence& s, int64_t pos);
  bool accept_in_grammar(Sequence& s, int token, bool& complete);
  // One step: cancel_and_admit, build_batch, make_room_for (prefix cache on), run_batch.
  void cancel_and_admit();
  StepBatch build_batch();
  void make_room_for(const StepBatch& batch);
  void run_batch(const StepBatch& batch);
  bool make_room(int64_t blocks);  // evicts prefix-cache entries until `blocks` are free
  void finish(Sequence& s, const std::string& reason, const std::string& error = "", bool degenerate_stop = false);

  const Model& model_;
  EngineOptions opts_;
  TextStreamFactory text_;
  KvCache kv_;
  std::unique_ptr<ThreadPool> pool_;
  ops::MatmulContext matmul_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Sequence>> waiting_;  // guarded by mu_
  std::vector<int> cancelled_;                      // guarded by mu_
  std::vector<std::unique_ptr<Sequence>> running_;  // engine thread only
  int next_id_ = 1;
  int running_count_ = 0;                           // guarded by mu_ (mirror for other threads)
  uint64_t kv_bytes_ = 0;                           // guarded by mu_
  int64_t prefilled_ = 0;                           // guarded by mu_
  std::vector<float> logits_;                       // engine thread only: the last step's logits
  std::vector<float> hidden_;                       // engine thread only: their final-normed rows, for drafters
  std::unique_ptr<PrefixCache> prefix_;             // engine thread only; null when off
  PrefixCacheStats prefix_stats_;                   // guarded by mu_ (a copy for other threads)
  std::unique_ptr<ImageEncoderCache> image_cache_;  // engine thread only; null when off
};

}  // namespace g4
