#include "model/forward_cached.h"

#include <algorithm>
#include <set>

#include "model/decoder_blocks.h"
#include "platform/error.h"

namespace g4 {

namespace {

// Consecutive rows of one sequence within a step.
struct Group {
  int seq;
  size_t row_begin, row_end;
  int64_t pos_begin;
};

std::vector<Group> group_rows(const std::vector<BatchRow>& rows, const KvStore& kv) {
  std::vector<Group> groups;
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

}  // namespace

std::vector<float> forward_cached(const Model& m, const std::vector<BatchRow>& rows, KvStore& kv, const blocks::Exec& ex) {
  using blocks::Vec;
  const ModelConfig& c = m.config;
  if (rows.empty()) return {};
  const std::vector<Group> groups = group_rows(rows, kv);
  const int64_t T = int64_t(rows.size()), L = c.num_hidden_layers, nH = c.num_attention_heads, W = c.sliding_window;
  std::vector<int> tokens(rows.size());
  std::vector<int64_t> positions(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    tokens[r] = rows[r].token;
    positions[r] = rows[r].pos;
  }
  blocks::check_tokens(c, tokens);
  const blocks::RopeTables rope(c);

  Vec x = blocks::embed(m, tokens);                                            // [T, H]
  const Vec ple = c.has_ple() ? blocks::per_layer_inputs(m, tokens, x, ex) : Vec{};  // [T, L, P]

  // This step's K/V per owning layer [T, kvh, hd]. The cache is only read during the step and
  // written at the end, so a KV-shared layer sees exactly what its source layer saw, and a chunk
  // longer than the ring never overwrites keys its own earlier rows still need.
  std::vector<Vec> step_k(static_cast<size_t>(L)), step_v(static_cast<size_t>(L));
  Vec keys, values;
  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    const int64_t hd = p.head_dim, kvh = p.kv_heads, row_w = kvh * hd;
    const bool sliding = p.type == LayerType::Sliding;
    blocks::Qkv qkv = blocks::project_qkv(m, int(i), x, positions, rope, ex);
    if (!p.kv_shared) {
      step_k[size_t(i)] = std::move(qkv.k);
      step_v[size_t(i)] = std::move(qkv.v);
    }
    const int src = p.kv_source_layer;
    const Vec& sk = step_k[size_t(src)];
    const Vec& sv = step_v[size_t(src)];
    Vec a(static_cast<size_t>(T * nH * hd));
    for (const Group& g : groups) {
      const int64_t n_step = int64_t(g.row_end - g.row_begin);
      // Keys: cached positions [first_cached, pos_begin) then this step's rows.
      const int64_t first_cached = sliding ? std::max<int64_t>(0, g.pos_begin - W + 1) : 0;
      const int64_t n_cached = g.pos_begin - first_cached;
      keys.resize(size_t((n_cached + n_step) * row_w));
      values.resize(keys.size());
      if (n_cached > 0) kv.read(src, g.seq, first_cached, g.pos_begin, keys.data(), values.data());
      std::copy(sk.begin() + ptrdiff_t(g.row_begin * row_w), sk.begin() + ptrdiff_t(g.row_end * row_w),
                keys.begin() + ptrdiff_t(n_cached * row_w));
      std::copy(sv.begin() + ptrdiff_t(g.row_begin * row_w), sv.begin() + ptrdiff_t(g.row_end * row_w),
                values.begin() + ptrdiff_t(n_cached * row_w));
      for (size_t r = g.row_begin; r < g.row_end; ++r) {
        const int64_t pos = positions[r];
        const int64_t first = sliding ? std::max<int64_t>(first_cached, pos - W + 1) : 0;  // q - k < W
        const int64_t off = first - first_cached;
        blocks::attend_row(&qkv.q[r * size_t(nH * hd)], &keys[size_t(off * row_w)], &values[size_t(off * row_w)],
                           pos - first + 1, nH, kvh, hd, &a[r * size_t(nH * hd)]);
      }
    }
    blocks::attention_output(m, int(i), a, x, ex);
    blocks::feed_forward(m, int(i), x, ex);
    blocks::per_layer_tail(m, int(i), x, ple, ex);
  }

  for (int64_t i = 0; i < L; ++i) {
    const LayerPlan& p = c.layers[size_t(i)];
    if (p.kv_shared) continue;
    const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
    for (const Group& g : groups)
      kv.write(int(i), g.seq, g.pos_begin, int64_t(g.row_end - g.row_begin), &step_k[size_t(i)][g.row_begin * size_t(row_w)],
               &step_v[size_t(i)][g.row_begin * size_t(row_w)]);
  }
  for (const Group& g : groups) kv.commit(g.seq, g.pos_begin + int64_t(g.row_end - g.row_begin));

  // Logits only for the rows that asked (the last prompt row, decode rows).
  const int64_t H = c.hidden_size;
  Vec wanted;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].want_logits) wanted.insert(wanted.end(), x.begin() + ptrdiff_t(r * H), x.begin() + ptrdiff_t((r + 1) * H));
  if (wanted.empty()) return {};
  return blocks::logits(m, std::move(wanted), ex);
}

}  // namespace g4
