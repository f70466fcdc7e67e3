// The cached, batched forward pass: rows from any number of sequences, each at its own absolute
// position, attending over what the KvStore holds plus the rows of the same step. Used for
// incremental decode, chunked prefill and continuous batching; tested against forward_reference.
#pragma once
#include <string>
#include <vector>

#include "model/cached_attention.h"
#include "model/executor.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "model/soft_tokens.h"

namespace g4 {

struct BatchRow {
  int seq = 0;          // sequence id in the KvStore
  int64_t pos = 0;      // absolute token position (never shifted by padding or batching)
  int token = 0;        // at a soft token: the placeholder id (image_token_id)
  bool want_logits = false;
  // Null for a text row. Else the image whose soft token this row carries, row pos - first_pos
  // of it (model/soft_tokens.h): its embedding replaces the token's, the per-layer table reads
  // the pad row, and under the "vision" rule the rows of one image see each other on sliding
  // layers. The caller keeps the span and its rows alive through the call.
  const SoftSpan* soft = nullptr;
};

// Rows of one sequence must be contiguous, at consecutive positions starting at kv.length(seq),
// and each sequence may appear once per step (violations throw g4::Error). A row's position
// must lie inside its soft span; under use_bidirectional_attention "vision" the rows of one
// vision span must all be in the step (its first rows would otherwise have missed its later
// ones), while a causal model may split a span across steps. Returns logits
// [n_wanted, V] in row order for rows with want_logits. Commits the new positions to `kv`.
// `ex` selects the reference loops (default) or the SIMD kernels on a thread pool.
std::vector<float> forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv,
                                  const blocks::Exec& ex = {});
// The same, writing the logits into `logits` (resized to [n_wanted, V]; empty when no row wants
// any). A caller that keeps the vector across steps reuses its storage: a fresh E2B decode
// step's 262144 logits were 1 MiB zero-filled on the calling thread every token.
// With `hidden`, also the final-normed hidden rows the logits came from, [n_wanted, H] (the
// LM head's input, which a drafter reads); the logits are the same bits either way.
void forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex,
                    std::vector<float>& logits, std::vector<float>* hidden = nullptr);

}  // namespace g4
