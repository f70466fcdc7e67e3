// Soft tokens in the text decoder: rows whose embedding comes from outside the vocabulary (an
// image's soft tokens, made by the vision tower and projector), and what changes at them
// (docs/vision.md, "Image positions in the decoder"; spec ../shared/docs/gemma4-vision.md §5):
// - the row's embedding is the soft token as is, never scaled by sqrt(H);
// - its per-layer embedding takes the table row of pad_token_id, while the PLE projection sees
//   the soft token;
// - under use_bidirectional_attention "vision", on sliding layers each row of an image sees every
//   row of the same image: ((kv <= q) OR same image) AND kv > q - W. Full layers stay causal, and
//   so does everything of a model without the rule.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace g4 {

// One image's soft tokens placed in a sequence at positions [first_pos, first_pos + count).
// Rows point at it (BatchRow::soft, or one entry of forward_reference's list); the caller owns
// it and its data, which must outlive the forward call. Nothing is copied but the rows.
struct SoftSpan {
  const float* rows = nullptr;  // [count, H] f32
  int64_t first_pos = 0;
  int64_t count = 0;
  // One group for the "vision" rule (image, or video frames); false would keep the rows causal
  // under every rule (audio), while still replacing their embeddings.
  bool vision = true;

  int64_t end_pos() const { return first_pos + count; }  // one past the last position
  const float* row_at(int64_t pos, int64_t H) const { return rows + (pos - first_pos) * H; }
};

// Per row of a step: the span whose soft token the row carries, or null for a text row. An empty
// vector means a text-only step (nothing is built or checked for one).
using RowSpans = std::vector<const SoftSpan*>;

// Checks spans for a whole sequence of T rows at positions 0..T-1 (forward_reference): each
// with rows, at least one position, inside the sequence, none overlapping. Returns the per-row
// spans (empty when `spans` is). Throws g4::Error naming the span.
RowSpans place_spans(const std::vector<SoftSpan>& spans, int64_t T);

// The last key position each row attends to on sliding layers: the last position of its image
// for a row of a vision span under the "vision" rule, its own position otherwise. Empty when no
// row reaches past itself (a text-only step, a causal config): attention stays plainly causal.
std::vector<int64_t> sliding_key_ends(const ModelConfig& c, const RowSpans& spans, const std::vector<int64_t>& positions);

// The token whose per-layer embedding row a row reads: pad_token_id at a soft token (HF's
// llm_input_ids), the row's own token elsewhere. Empty when the step has no span: then every row
// reads its own token's, and nothing is copied.
std::vector<int> per_layer_ids(const ModelConfig& c, const std::vector<int>& tokens, const RowSpans& spans);

}  // namespace g4
