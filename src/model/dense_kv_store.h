// DenseKvStore: a KvStore that keeps every position of every owning layer in f32, with no ring
// and no blocks. For checks that need more than an engine cache keeps (a drafter reads W+1
// sliding positions) and for `g4 logits --draft-model`; not for serving (memory grows with the
// sequence on every layer).
#pragma once
#include <vector>

#include "model/config.h"
#include "model/kv_store.h"

namespace g4 {

class DenseKvStore : public KvStore {
 public:
  explicit DenseKvStore(const ModelConfig& c);
  int add_sequence();  // ids 0, 1, ...
  int64_t length(int seq) const override;
  void read(int layer, int seq, int64_t begin, int64_t end, float* k, float* v) const override;
  void write(int layer, int seq, int64_t begin, int64_t n, const float* k, const float* v) override;
  void commit(int seq, int64_t new_length) override;

 private:
  struct Sequence {
    int64_t length = 0;
    std::vector<std::vector<float>> k, v;  // per layer: [written positions, kvh, hd]
  };
  const Sequence& at(int seq) const;
  std::vector<int64_t> row_width_;  // per layer: kvh · hd, 0 on KV-shared layers
  std::vector<Sequence> seqs_;
};

}  // namespace g4
