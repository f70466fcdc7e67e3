#include "model/dense_kv_store.h"

#include <algorithm>

#include "platform/error.h"

namespace g4 {

DenseKvStore::DenseKvStore(const ModelConfig& c) {
  for (const LayerPlan& p : c.layers) row_width_.push_back(p.kv_shared ? 0 : int64_t(p.kv_heads) * p.head_dim);
}

int DenseKvStore::add_sequence() {
  Sequence s;
  s.k.resize(row_width_.size());
  s.v.resize(row_width_.size());
  seqs_.push_back(std::move(s));
  return int(seqs_.size()) - 1;
}

const DenseKvStore::Sequence& DenseKvStore::at(int seq) const {
  if (seq < 0 || size_t(seq) >= seqs_.size()) throw Error("KV store: no sequence " + std::to_string(seq));
  return seqs_[size_t(seq)];
}

int64_t DenseKvStore::length(int seq) const { return at(seq).length; }

void DenseKvStore::read(int layer, int seq, int64_t begin, int64_t end, float* k, float* v) const {
  const Sequence& s = at(seq);
  if (layer < 0 || size_t(layer) >= row_width_.size() || row_width_[size_t(layer)] == 0)
    throw Error("KV store: layer " + std::to_string(layer) + " owns no K/V");
  const int64_t w = row_width_[size_t(layer)];
  const int64_t held = int64_t(s.k[size_t(layer)].size()) / w;
  if (begin < 0 || begin > end || end > std::min(held, s.length))
    throw Error("KV store: read of positions [" + std::to_string(begin) + ", " + std::to_string(end) + ") of sequence " +
                std::to_string(seq) + ", which holds " + std::to_string(s.length));
  std::copy(s.k[size_t(layer)].begin() + begin * w, s.k[size_t(layer)].begin() + end * w, k);
  std::copy(s.v[size_t(layer)].begin() + begin * w, s.v[size_t(layer)].begin() + end * w, v);
}

void DenseKvStore::write(int layer, int seq, int64_t begin, int64_t n, const float* k, const float* v) {
  at(seq);
  Sequence& s = seqs_[size_t(seq)];
  const int64_t w = row_width_.at(size_t(layer));
  if (w == 0 || begin != s.length) throw Error("KV store: write at position " + std::to_string(begin) + " of sequence " +
                                               std::to_string(seq) + " (length " + std::to_string(s.length) + ")");
  for (auto [dst, src] : {std::pair{&s.k[size_t(layer)], k}, std::pair{&s.v[size_t(layer)], v}}) {
    dst->resize(size_t(begin * w));
    dst->insert(dst->end(), src, src + n * w);
  }
}

void DenseKvStore::commit(int seq, int64_t new_length) {
  at(seq);
  seqs_[size_t(seq)].length = new_length;
}

}  // namespace g4
