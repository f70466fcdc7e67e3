#include "model/soft_tokens.h"

#include <algorithm>
#include <string>

#include "platform/error.h"

namespace g4 {

namespace {

std::string describe(const SoftSpan& s) {
  return "soft-token span at positions [" + std::to_string(s.first_pos) + ", " + std::to_string(s.end_pos()) + ")";
}

}  // namespace

RowSpans place_spans(const std::vector<SoftSpan>& spans, int64_t T) {
  if (spans.empty()) return {};
  RowSpans rows(static_cast<size_t>(T), nullptr);
  for (const SoftSpan& s : spans) {
    if (!s.rows || s.count < 1) throw Error("forward: " + describe(s) + " has no soft-token rows");
    if (s.first_pos < 0 || s.end_pos() > T)
      throw Error("forward: " + describe(s) + " lies outside the sequence of " + std::to_string(T) + " tokens");
    for (int64_t p = s.first_pos; p < s.end_pos(); ++p) {
      if (rows[size_t(p)])
        throw Error("forward: " + describe(s) + " overlaps the " + describe(*rows[size_t(p)]) + " at position " +
                    std::to_string(p));
      rows[size_t(p)] = &s;
    }
  }
  return rows;
}

std::vector<int64_t> sliding_key_ends(const ModelConfig& c, const RowSpans& spans, const std::vector<int64_t>& positions) {
  if (spans.empty() || !c.vision_bidirectional()) return {};
  std::vector<int64_t> ends(positions);
  bool any = false;
  for (size_t r = 0; r < spans.size(); ++r) {
    const SoftSpan* s = spans[r];
    if (!s || !s->vision) continue;
    ends[r] = std::max(ends[r], s->end_pos() - 1);
    any = any || ends[r] != positions[r];
  }
  return any ? ends : std::vector<int64_t>{};
}

std::vector<int> per_layer_ids(const ModelConfig& c, const std::vector<int>& tokens, const RowSpans& spans) {
  if (spans.empty()) return {};
  std::vector<int> ids(tokens);
  for (size_t r = 0; r < ids.size(); ++r)
    if (spans[r]) ids[r] = c.pad_token_id;
  return ids;
}

}  // namespace g4
