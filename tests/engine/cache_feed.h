// Drives the cached forward pass the way the engine does, for tests: one sequence in chunks, or
// several sequences sharing steps (joining, prefilling, decoding and leaving at different times).
// Returns logits for every fed position, so a test can hold them against an independent truth
// (the fixtures, the whole-sequence reference, the same sequence run alone).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <functional>
#include <vector>

#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/presets.h"
#include "model/synth.h"
#include "test_util.h"

namespace g4::test {

// Random-weight checkpoints of `presets` with a sliding window of `window` in `dir`/<preset>, so
// short sequences wrap the rings many times.
inline void write_windowed_synths(const std::filesystem::path& dir, std::initializer_list<const char*> presets,
                                  int64_t window) {
  for (const char* p : presets) {
    ModelConfig c = preset_config(p);
    c.sliding_window = window;
    c.finalize();
    write_synth_checkpoint(c, SynthOptions{}, dir / p);
  }
}

// A suite's random-weight tiny-e, tiny-31b and tiny-moe with a window of 4, written once per
// suite (`Tag` keeps each suite's directory its own).
template <class Tag>
class WindowedSynthSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_windowed_synths(dir_->path(), {"tiny-e", "tiny-31b", "tiny-moe"}, 4);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::unique_ptr<Model> model(const std::string& p) { return load_model(*dir_ / p); }
  static inline TempDir* dir_ = nullptr;
};

// `tokens` of sequence `seq` (already in kv, empty), `chunk` per step: logits [tokens, V].
inline std::vector<float> feed_chunked(const Model& m, KvCache& kv, int seq, const std::vector<int>& tokens,
                                       size_t chunk, const blocks::Exec& ex = {}) {
  std::vector<float> out;
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    std::vector<BatchRow> rows;
    for (size_t t = start; t < std::min(tokens.size(), start + chunk); ++t) rows.push_back({seq, int64_t(t), tokens[t], true});
    auto l = forward_cached(m, rows, kv, ex);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// How many of sequence i's next tokens join step `step`, given `fed` already in (0: not yet).
// Clamped to what is left.
using RowsNow = std::function<size_t(size_t i, size_t fed, int step)>;

// Sequences sharing each step: a sequence enters the cache when it first feeds and, with
// `free_when_done`, leaves it after its last token. Logits per sequence, position order.
inline std::vector<std::vector<float>> feed_batched(const Model& m, KvCache& kv,
                                                    const std::vector<std::vector<int>>& streams,
                                                    const blocks::Exec& ex, const RowsNow& rows_now,
                                                    bool free_when_done = false) {
  const int64_t V = m.config.vocab_size;
  std::vector<int> id(streams.size(), -1);
  std::vector<size_t> fed(streams.size(), 0);
  std::vector<std::vector<float>> out(streams.size());
  std::vector<float> l;  // kept across steps, as the engine keeps its logits (sizes vary by step)
  for (int step = 0;; ++step) {
    bool all_fed = true;
    for (size_t i = 0; i < streams.size(); ++i) all_fed = all_fed && fed[i] == streams[i].size();
    if (all_fed) break;
    if (step > 100000) {
      ADD_FAILURE() << "feed_batched: rows_now never fed every token";
      break;
    }
    std::vector<BatchRow> rows;
    std::vector<size_t> owner;
    for (size_t i = 0; i < streams.size(); ++i) {
      const size_t n = std::min(streams[i].size() - fed[i], rows_now(i, fed[i], step));
      if (n == 0) continue;
      if (id[i] < 0) id[i] = kv.add_sequence();
      for (size_t k = 0; k < n; ++k) {
        rows.push_back({id[i], int64_t(fed[i] + k), streams[i][fed[i] + k], true});
        owner.push_back(i);
      }
      fed[i] += n;
    }
    if (rows.empty()) continue;
    forward_cached(m, rows, kv, ex, l);
    for (size_t r = 0; r < rows.size(); ++r)
      out[owner[r]].insert(out[owner[r]].end(), l.begin() + ptrdiff_t(r * V), l.begin() + ptrdiff_t((r + 1) * V));
    if (free_when_done)
      for (size_t i = 0; i < streams.size(); ++i)
        if (id[i] >= 0 && fed[i] == streams[i].size() && kv.has_sequence(id[i])) kv.free_sequence(id[i]);
  }
  return out;
}

}  // namespace g4::test
