#include "model/forward_cached.h"

#include <algorithm>
#include <set>
#include <string>

#include "model/gemma4.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

namespace g4 {

namespace {

// The step's rows as runs of one sequence each, checked: consecutive positions starting where
// the sequence's cache ends, each sequence once.
std::vector<RowGroup> group_rows(const std::vector<BatchRow>& rows, const KvStore& kv) {
  std::vector<RowGroup> groups;
  std::set<int> seen;
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& row = rows[r];
    if (!groups.empty() && groups.back().seq == row.seq) {
      const int64_t expect = groups.back().pos_begin + int64_t(r - groups.back().row_begin);
      if (row.pos != expect)
        throw Error("batch: sequence " + std::to_string(row.seq) + " row " + std::to_string(r) + " has position " +
                    std::to_string(row.pos) + ", expected " + std::to_string(expect) + " (rows must be consecutive)");
      groups.back().row_end = r + 1;
      continue;
    }
    if (!seen.insert(row.seq).second)
      throw Error("batch: sequence " + std::to_string(row.seq) + " appears in two separate runs of rows");
    const int64_t len = kv.length(row.seq);
    if (row.pos != len)
      throw Error("batch: sequence " + std::to_string(row.seq) + " starts at position " + std::to_string(row.pos) +
                  " but its cache holds " + std::to_string(len) + " positions");
    groups.push_back({row.seq, r, r + 1, row.pos});
  }
  return groups;
}

std::string span_text(const SoftSpan& s) {
  return "an image at positions [" + std::to_string(s.first_pos) + ", " + std::to_string(s.end_pos()) + ")";
}

// The step's soft-token spans per row (empty when no row has one), checked: each row inside its
// span, and under the "vision" rule each vision span whole within its sequence's run of rows.
RowSpans step_spans(const ModelConfig& c, const std::vector<BatchRow>& rows, const std::vector<RowGroup>& groups) {
  RowSpans spans;
  for (const RowGroup& g : groups)
    for (size_t r = g.row_begin; r < g.row_end; ++r) {
      const SoftSpan* s = rows[r].soft;
      if (!s) continue;
      if (spans.empty()) spans.assign(rows.size(), nullptr);
      spans[r] = s;
      auto where = [&] {  // built only for an error
        return "batch: sequence " + std::to_string(rows[r].seq) + " row " + std::to_string(r) + " at position " +
               std::to_string(rows[r].pos);
      };
      if (!s->rows || s->count < 1) throw Error(where() + " carries " + span_text(*s) + " without soft-token rows");
      if (rows[r].pos < s->first_pos || rows[r].pos >= s->end_pos())
        throw Error(where() + " lies outside the soft tokens of " + span_text(*s) + " it points at");
      if (!c.vision_bidirectional() || !s->vision) continue;
      // Rows are consecutive: the span is whole when its first row is in the run, points at it,
      // and (checked once, there) so do the next count - 1 rows.
      const int64_t run_end = g.pos_begin + int64_t(g.row_end - g.row_begin);
      const size_t first_row = g.row_begin + size_t(std::max<int64_t>(0, s->first_pos - g.pos_begin));
      bool whole = s->first_pos >= g.pos_begin && rows[first_row].soft == s;
      if (whole && r == first_row) {
        whole = s->end_pos() <= run_end;
        for (size_t i = r; whole && i < r + size_t(s->count); ++i) whole = rows[i].soft == s;
      }
      if (!whole)
        throw Error(where() + " belongs to " + span_text(*s) + ", but the step holds positions [" +
                    std::to_string(g.pos_begin) + ", " + std::to_string(run_end) +
                    ") of the sequence: with use_bidirectional_attention = \"vision\" an image's tokens see each "
                    "other, so all of them must be in one step");
    }
  return spans;
}

// The step's K/V into the cache, after every layer has read what it needs: a KV-shared layer
// sees exactly what its source saw, and a chunk longer than the ring never overwrites keys its
// own earlier rows still need.
void write_step(const ModelConfig& c, const std::vector<RowGroup>& groups, const blocks::StepKv& step, KvStore& kv) {
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    if (p.kv_shared) continue;
    const size_t row_w = size_t(p.kv_heads) * size_t(p.head_dim);
    for (const RowGroup& g : groups)
      kv.write(i, g.seq, g.pos_begin, int64_t(g.row_end - g.row_begin), &step.k[size_t(i)][g.row_begin * row_w],
               &step.v[size_t(i)][g.row_begin * row_w]);
  }
  for (const RowGroup& g : groups) kv.commit(g.seq, g.pos_begin + int64_t(g.row_end - g.row_begin));
}

}  // namespace

std::vector<float> forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex) {
  std::vector<float> logits;
  forward_cached(m, rows, kv, ex, logits);
  return logits;
}

void forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex,
                    std::vector<float>& logits, std::vector<float>* hidden) {
  logits.clear();
  if (hidden) hidden->clear();
  if (rows.empty()) return;
  const std::vector<RowGroup> groups = group_rows(rows, kv);
  std::vector<int> tokens(rows.size());
  std::vector<int64_t> positions(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    tokens[r] = rows[r].token;
    positions[r] = rows[r].pos;
  }
  blocks::check_tokens(m.config, tokens);
  const RowSpans spans = step_spans(m.config, rows, groups);
  // Past each row's own position only under the "vision" rule, on sliding layers; empty: causal.
  const std::vector<int64_t> key_ends = sliding_key_ends(m.config, spans, positions);
  // Decode warms each next product's weights on the pool's workers; none of that reading may
  // outlive the step, whichever way it ends (the caller may free the model).
  struct StopWarm {
    ThreadPool* pool;
    ~StopWarm() {
      if (pool) pool->stop_warm();
    }
  } stop_warm{ex.matmul ? ex.matmul->pool : nullptr};
  const blocks::Attend attend = [&](int layer, const blocks::Vec& q, const blocks::Vec& k, const blocks::Vec& v,
                                    blocks::Vec& a) {
    attend_from_cache(m, layer, kv, groups, positions, key_ends, q, k, v, a, ex);
  };
  blocks::StepKv step;
  const blocks::Vec x = blocks::decoder_stack(m, tokens, positions, ex, attend, step, spans);  // [T, H]
  write_step(m.config, groups, step, kv);
  // Logits only for the rows that asked (the last prompt row, decode rows).
  const int64_t H = m.config.hidden_size;
  blocks::Vec wanted;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].want_logits) wanted.insert(wanted.end(), x.begin() + ptrdiff_t(r * H), x.begin() + ptrdiff_t((r + 1) * H));
  if (wanted.empty()) return;
  blocks::logits_into(m, std::move(wanted), ex, logits, hidden);
}

}  // namespace g4
