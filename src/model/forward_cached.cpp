#include "model/forward_cached.h"

#include <set>

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
    attend_from_cache(m, layer, kv, groups, positions, q, k, v, a, ex);
  };
  blocks::StepKv step;
  const blocks::Vec x = blocks::decoder_stack(m, tokens, positions, ex, attend, step);  // [T, H]
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
