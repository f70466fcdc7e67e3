// The f32 reference forward pass of the Gemma 4 text decoder over one whole sequence.
// Simple loops, no cache, no batching: the oracle every faster path is tested against.
// Spec: docs/architecture.md section 3; image positions: docs/vision.md.
#pragma once
#include <vector>

#include "model/model.h"
#include "model/soft_tokens.h"

namespace g4 {

// tokens: ids at positions 0..T-1 (no BOS is added). Returns logits [T, V], row i = logits after
// token i. Throws g4::Error for an empty sequence or an id outside the vocabulary.
std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens);
// The same with soft tokens at the positions of `soft` (first_pos indexes `tokens`). The ids
// there (the image placeholders) are checked against the vocabulary but not embedded. Spans
// outside the sequence or overlapping throw g4::Error.
std::vector<float> forward_reference(const Model& m, const std::vector<int>& tokens, const std::vector<SoftSpan>& soft);

}  // namespace g4
