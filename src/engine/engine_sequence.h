// Engine::Sequence: the state of one running choice (or of a request before its choices are
// forked), shared by the scheduler (engine.cpp) and the per-token path (engine_emit.cpp).
#pragma once
#include <chrono>

#include "model/forward_cached.h"

#include "engine/engine.h"

namespace g4 {

using Clock = std::chrono::steady_clock;

struct Engine::Sequence {
  int id = 0;
  int choice = 0;
  int slots = 1;               // running slots held: the request's n until its choices are forked
  int64_t cached = 0;          // prompt tokens restored from the prefix cache
  GenerationRequest req;
  EventCallback cb;
  int kv_seq = -1;
  int64_t fed = 0;             // prompt/generated tokens already in the cache
  std::vector<int> generated;
  int pending = -1;            // sampled, not yet fed
  bool done = false;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StopMatcher> stops;
  std::unique_ptr<DegeneracyGuard> guard;
  std::unique_ptr<TokenTextStream> text;
  Clock::time_point submitted, admitted, first_token;
  bool has_first_token = false;
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  grammar::TokenMask mask;
  double grammar_seconds = 0;
  int64_t grammar_masks = 0;
  // Speculative decoding: the source, how many drafts to ask for, this step's drafts.
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<DraftLength> draft_length;
  int draft_k = 0;
  std::vector<int> drafts;
  std::vector<float> hidden;  // [H]: the final-normed row that chose `pending` (drafters that read it)
  SpeculationStats spec;
  // Images: the prefix cache's view of the prompt (prompt_images.h), and each image's soft
  // tokens once computed or found in the encoder cache (soft[i] belongs to req.images[i]; the
  // span points into its rows, which the sequence holds, so an eviction cannot free them).
  std::vector<int> prefix_keys;
  struct SoftImage {
    SoftSpan span;
    std::shared_ptr<const SoftRows> rows;  // [S, H]
  };
  std::vector<SoftImage> soft;
  double vision_seconds = 0;
  int64_t images_encoded = 0, image_cache_hits = 0;
};

// Rows of one step's forward pass and the sequence each belongs to (a sequence's rows adjacent).
struct Engine::StepBatch {
  std::vector<BatchRow> rows;
  std::vector<Sequence*> owner;
  int64_t prompt_rows = 0;  // of rows, prompt tokens being prefilled
};

}  // namespace g4
