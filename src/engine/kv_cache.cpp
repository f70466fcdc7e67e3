#include "engine/kv_cache.h"

#include <algorithm>

#include "platform/error.h"

namespace g4 {

KvFootprint kv_footprint(const ModelConfig& c, KvDType dtype) {
  KvFootprint f;
  for (const LayerPlan& p : c.layers) {
    if (p.kv_shared) continue;  // reads its source layer's cache
    const uint64_t b = 2 * kv_row_bytes(dtype, p.kv_heads, p.head_dim);  // K and V, also on K=V layers
    (p.type == LayerType::Sliding ? f.sliding_bytes_per_token : f.full_bytes_per_token) += b;
  }
  f.bytes_per_token = f.sliding_bytes_per_token + f.full_bytes_per_token;
  return f;
}

KvCache::KvCache(const ModelConfig& c, KvCacheOptions o) : cfg_(c), opts_(o) {
  if (opts_.block_tokens < 1) throw Error("KV cache: block_tokens must be >= 1");
  if (opts_.ring_extra_slots < 0) throw Error("KV cache: ring_extra_slots must be >= 0");
  if (opts_.max_total_tokens < opts_.block_tokens)
    throw Error("KV cache: max_total_tokens " + std::to_string(opts_.max_total_tokens) + " is below one block (" +
                std::to_string(opts_.block_tokens) + ")");
  for (size_t i = 0; i < c.layers.size() && first_full_layer_ < 0; ++i)
    if (!c.layers[i].kv_shared && c.layers[i].type != LayerType::Sliding) first_full_layer_ = int(i);
}

KvCache::~KvCache() = default;

int KvCache::add_sequence(bool history) {
  const int id = next_seq_++;
  Sequence& s = seqs_[id];
  s.keeps_history = history;
  for (size_t i = 0; i < cfg_.layers.size(); ++i) {
    const LayerPlan& p = cfg_.layers[i];
    if (p.kv_shared) continue;
    if (p.type == LayerType::Sliding) {
      const int64_t R = ring_slots();
      s.rings[int(i)] = std::make_unique<Ring>(Ring{KvRows(opts_.dtype, R, p.kv_heads, p.head_dim),
                                                    KvRows(opts_.dtype, R, p.kv_heads, p.head_dim),
                                                    std::vector<int64_t>(size_t(R), -1)});
      if (history) s.history[int(i)];
    } else {
      s.block_table[int(i)];
    }
  }
  return id;
}

void KvCache::free_sequence(int seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  for (const auto* tables : {&it->second.block_table, &it->second.history})
    for (const auto& [layer, table] : *tables)
      for (int32_t b : table) release(layer, b);
  seqs_.erase(it);
}

void KvCache::release(int layer, int32_t block) {
  int32_t& r = refs_.at(layer).at(size_t(block));
  if (r <= 0) throw Error("KV cache: block " + std::to_string(block) + " of layer " + std::to_string(layer) + " released twice");
  if (--r == 0) free_[layer].push_back(block);
}

int KvCache::fork_sequence(int seq) {
  const Sequence& src = seq_or_throw(seq);
  const int64_t copies = !src.block_table.empty() && src.length % opts_.block_tokens != 0 ? 1 : 0;
  if (copies > free_blocks())
    throw Error("KV cache full: copying sequence " + std::to_string(seq) + " needs " + std::to_string(copies) +
                " block per full layer, " + std::to_string(free_blocks()) + " are free");
  const int id = next_seq_++;
  Sequence& dst = seqs_[id];
  dst.length = src.length;
  dst.keeps_history = src.keeps_history;
  for (const auto& [layer, ring] : src.rings) dst.rings[layer] = std::make_unique<Ring>(*ring);
  for (const auto& [layer, table] : src.block_table) dst.block_table[layer] = share_blocks(layer, table, src.length);
  for (const auto& [layer, table] : src.history) dst.history[layer] = share_blocks(layer, table, src.length);
  return id;
}

std::vector<int32_t> KvCache::share_blocks(int layer, const std::vector<int32_t>& table, int64_t positions) {
  const int64_t bt = opts_.block_tokens, whole = positions / bt, all = (positions + bt - 1) / bt;
  std::vector<int32_t> out;
  for (int64_t i = 0; i < all && i < int64_t(table.size()); ++i) {
    if (i < whole) {
      ++refs_.at(layer).at(size_t(table[size_t(i)]));
      out.push_back(table[size_t(i)]);
      continue;
    }
    const int32_t nb = take_block(layer);
    auto& pool = blocks_.at(layer);
    *pool[size_t(nb)] = *pool[size_t(table[size_t(i)])];
    out.push_back(nb);
  }
  return out;
}

int KvCache::restore_prefix(int seq, int64_t m) {
  const Sequence& src = seq_or_throw(seq);
  if (m < 1 || m > src.length)
    throw Error("KV cache: restoring " + std::to_string(m) + " positions of sequence " + std::to_string(seq) + " which holds " +
                std::to_string(src.length));
  if (!src.rings.empty() && !src.keeps_history)
    throw Error("KV cache: sequence " + std::to_string(seq) + " keeps no history of its sliding layers to restore from");
  const int64_t bt = opts_.block_tokens, copies = !src.block_table.empty() && m % bt != 0 ? 1 : 0;
  if (copies > free_blocks())
    throw Error("KV cache full: restoring " + std::to_string(m) + " positions needs " + std::to_string(copies) +
                " block per full layer, " + std::to_string(free_blocks()) + " are free");
  const int id = add_sequence(/*history=*/true);
  Sequence& dst = seqs_.at(id);
  for (const auto& [layer, table] : src.block_table) dst.block_table[layer] = share_blocks(layer, table, m);
  const int64_t R = ring_slots();
  for (const auto& [layer, table] : src.history) {
    dst.history[layer] = share_blocks(layer, table, m);
    Ring& r = *dst.rings.at(layer);
    const auto& pool = blocks_.at(layer);
    for (int64_t pos = std::max<int64_t>(0, m - R); pos < m; ++pos) {
      const Block& b = *pool[size_t(table[size_t(pos / bt)])];
      r.k.copy_rows(pos % R, b.k, pos % bt, 1);
      r.v.copy_rows(pos % R, b.v, pos % bt, 1);
      r.slot_pos[size_t(pos % R)] = pos;
    }
  }
  dst.length = m;
  return id;
}

bool KvCache::has_history(int seq) const { return seq_or_throw(seq).keeps_history; }

uint64_t KvCache::sequence_bytes(int seq) const {
  const Sequence& s = seq_or_throw(seq);
  uint64_t b = 0;
  for (const auto& [layer, r] : s.rings) b += r->k.bytes() + r->v.bytes();
  for (const auto* tables : {&s.block_table, &s.history})
    for (const auto& [layer, table] : *tables)
      if (!table.empty()) b += uint64_t(table.size()) * (blocks_.at(layer)[0]->k.bytes() * 2);
  return b;
}

int64_t KvCache::blocks_for(int64_t length) const {
  for (const LayerPlan& p : cfg_.layers)
    if (!p.kv_shared && p.type != LayerType::Sliding) return (length + opts_.block_tokens - 1) / opts_.block_tokens;
  return 0;
}

const KvCache::Sequence& KvCache::seq_or_throw(int seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("KV cache: unknown sequence " + std::to_string(seq));
  return it->second;
}

int64_t KvCache::length(int seq) const { return seq_or_throw(seq).length; }

int64_t KvCache::full_blocks_in_use() const {
  if (first_full_layer_ < 0) return 0;
  const auto pool = blocks_.find(first_full_layer_);
  const auto fl = free_.find(first_full_layer_);
  return (pool == blocks_.end() ? 0 : int64_t(pool->second.size())) - (fl == free_.end() ? 0 : int64_t(fl->second.size()));
}

int64_t KvCache::free_blocks() const { return opts_.max_total_tokens / opts_.block_tokens - full_blocks_in_use(); }

bool KvCache::can_grow(int seq, int64_t new_length) const { return blocks_needed(seq, new_length) <= free_blocks(); }

int64_t KvCache::blocks_needed(int seq, int64_t new_length) const {
  const Sequence& s = seq_or_throw(seq);
  if (s.block_table.empty()) return 0;  // no full layer owns KV
  const int64_t have = int64_t(s.block_table.begin()->second.size());
  const int64_t need = (new_length + opts_.block_tokens - 1) / opts_.block_tokens;
  return std::max<int64_t>(0, need - have);
}

uint64_t KvCache::bytes_in_use() const {  // shared blocks once
  uint64_t b = 0;
  for (const auto& [id, s] : seqs_)
    for (const auto& [layer, r] : s.rings) b += r->k.bytes() + r->v.bytes();
  for (const auto& [layer, pool] : blocks_) {
    const auto fl = free_.find(layer);
    const uint64_t used = pool.size() - (fl == free_.end() ? 0 : fl->second.size());
    if (!pool.empty()) b += used * pool[0]->k.bytes() * 2;
  }
  return b;
}

int32_t KvCache::take_block(int layer) {
  auto& fl = free_[layer];
  auto& refs = refs_[layer];
  if (!fl.empty()) {
    int32_t b = fl.back();
    fl.pop_back();
    refs[size_t(b)] = 1;
    return b;
  }
  const LayerPlan& p = cfg_.layers[size_t(layer)];
  auto& pool = blocks_[layer];
  pool.push_back(std::make_unique<Block>(Block{KvRows(opts_.dtype, opts_.block_tokens, p.kv_heads, p.head_dim),
                                               KvRows(opts_.dtype, opts_.block_tokens, p.kv_heads, p.head_dim)}));
  refs.push_back(1);
  return int32_t(pool.size() - 1);
}

void KvCache::ensure_history(Sequence& s, int layer, int64_t positions) {
  auto& table = s.history.at(layer);
  const int64_t need = (positions + opts_.block_tokens - 1) / opts_.block_tokens;
  while (int64_t(table.size()) < need) table.push_back(take_block(layer));
}

void KvCache::ensure_blocks(Sequence& s, int layer, int64_t positions) {
  auto& table = s.block_table.at(layer);
  const int64_t need = (positions + opts_.block_tokens - 1) / opts_.block_tokens;
  const bool first_full_layer = &table == &s.block_table.begin()->second;
  while (int64_t(table.size()) < need) {
    if (first_full_layer && free_blocks() <= 0)
      throw Error("KV cache full: " + std::to_string(opts_.max_total_tokens) + " token slots per full layer in use");
    table.push_back(take_block(layer));
  }
}

void KvCache::check_read_range(const Sequence& s, int seq, int64_t begin, int64_t end) const {
  if (begin < 0 || end > s.length || begin > end)
    throw Error("KV cache: read of positions [" + std::to_string(begin) + ", " + std::to_string(end) + ") of sequence " +
                std::to_string(seq) + " which holds " + std::to_string(s.length));
}

void KvCache::check_slot(const Ring& r, int layer, int64_t pos) const {
  const int64_t slot = pos % ring_slots();
  // The slot must hold exactly this absolute position; anything else is a window bug.
  if (r.slot_pos[size_t(slot)] != pos)
    throw Error("KV ring invariant: layer " + std::to_string(layer) + " slot " + std::to_string(slot) + " holds position " +
                std::to_string(r.slot_pos[size_t(slot)]) + ", asked for " + std::to_string(pos));
}

void KvCache::read(int layer, int seq, int64_t begin, int64_t end, float* k, float* v) const {
  const Sequence& s = seq_or_throw(seq);
  const LayerPlan& p = cfg_.layers[size_t(layer)];
  const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
  check_read_range(s, seq, begin, end);
  if (p.type == LayerType::Sliding) {
    const Ring& r = *s.rings.at(layer);
    const int64_t R = ring_slots();
    for (int64_t pos = begin; pos < end; ++pos) {
      const int64_t slot = pos % R;
      check_slot(r, layer, pos);
      r.k.read(slot, k + (pos - begin) * row_w);
      r.v.read(slot, v + (pos - begin) * row_w);
    }
    return;
  }
  const auto& table = s.block_table.at(layer);
  const auto& pool = blocks_.at(layer);
  for (int64_t pos = begin; pos < end; ++pos) {
    const Block& b = *pool[size_t(table[size_t(pos / opts_.block_tokens)])];
    b.k.read(pos % opts_.block_tokens, k + (pos - begin) * row_w);
    b.v.read(pos % opts_.block_tokens, v + (pos - begin) * row_w);
  }
}

ops::KvElem kv_span_element(KvDType t) {
  switch (t) {
    case KvDType::F32: return ops::KvElem::F32;
    case KvDType::F16: return ops::KvElem::F16;
    case KvDType::BF16: return ops::KvElem::BF16;
    case KvDType::Int8: return ops::KvElem::I8;
  }
  return ops::KvElem::F32;
}

namespace {

// Rows [row, row + n) of a ring or block, which KvRows stores contiguously.
ops::KvSpan span_of(const KvRows& k, const KvRows& v, int64_t row, int64_t n) {
  return {kv_span_element(k.dtype()), n, k.row_data(row), v.row_data(row), k.row_scales(row), v.row_scales(row)};
}

}  // namespace

std::optional<ops::KvElem> KvCache::view_element() const { return kv_span_element(opts_.dtype); }

bool KvCache::view(int layer, int seq, int64_t begin, int64_t end, std::vector<ops::KvSpan>& out) const {
  const Sequence& s = seq_or_throw(seq);
  const LayerPlan& p = cfg_.layers[size_t(layer)];
  check_read_range(s, seq, begin, end);
  if (p.type == LayerType::Sliding) {
    const Ring& r = *s.rings.at(layer);
    const int64_t R = ring_slots();
    for (int64_t pos = begin; pos < end;) {
      const int64_t slot = pos % R, run = std::min(end - pos, R - slot);  // up to where the slots wrap
      for (int64_t q = pos; q < pos + run; ++q) check_slot(r, layer, q);
      out.push_back(span_of(r.k, r.v, slot, run));
      pos += run;
    }
    return true;
  }
  const auto& table = s.block_table.at(layer);
  const auto& pool = blocks_.at(layer);
  const int64_t bt = opts_.block_tokens;
  for (int64_t pos = begin; pos < end;) {
    const int64_t off = pos % bt, run = std::min(end - pos, bt - off);
    const Block& b = *pool[size_t(table.at(size_t(pos / bt)))];
    out.push_back(span_of(b.k, b.v, off, run));
    pos += run;
  }
  return true;
}

void KvCache::write(int layer, int seq, int64_t begin, int64_t n, const float* k, const float* v) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("KV cache: unknown sequence " + std::to_string(seq));
  Sequence& s = it->second;
  const LayerPlan& p = cfg_.layers[size_t(layer)];
  const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
  if (p.type == LayerType::Sliding) {
    Ring& r = *s.rings.at(layer);
    const int64_t R = ring_slots();
    // Only the last R positions of the chunk survive in the ring.
    for (int64_t pos = std::max(begin, begin + n - R); pos < begin + n; ++pos) {
      const int64_t slot = pos % R;
      r.k.write(slot, k + (pos - begin) * row_w);
      r.v.write(slot, v + (pos - begin) * row_w);
      r.slot_pos[size_t(slot)] = pos;
    }
    if (s.keeps_history) {  // every position, for restore_prefix
      ensure_history(s, layer, begin + n);
      write_rows(layer, s.history.at(layer), begin, n, k, v);
    }
    return;
  }
  ensure_blocks(s, layer, begin + n);
  write_rows(layer, s.block_table.at(layer), begin, n, k, v);
}

void KvCache::write_rows(int layer, const std::vector<int32_t>& table, int64_t begin, int64_t n, const float* k,
                         const float* v) {
  const LayerPlan& p = cfg_.layers[size_t(layer)];
  const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
  auto& pool = blocks_.at(layer);
  const auto& refs = refs_.at(layer);
  for (int64_t pos = begin; pos < begin + n; ++pos) {
    const int32_t id = table[size_t(pos / opts_.block_tokens)];
    if (refs[size_t(id)] != 1)  // shared blocks lie wholly below every holder's length
      throw Error("KV cache: write at position " + std::to_string(pos) + " of layer " + std::to_string(layer) +
                  " into a block shared by " + std::to_string(refs[size_t(id)]) + " sequences");
    Block& b = *pool[size_t(id)];
    b.k.write(pos % opts_.block_tokens, k + (pos - begin) * row_w);
    b.v.write(pos % opts_.block_tokens, v + (pos - begin) * row_w);
  }
}

void KvCache::fill_for_benchmark(int seq, int64_t new_length, uint64_t seed) {
  const int64_t start = length(seq);
  uint64_t state = seed;
  for (size_t i = 0; i < cfg_.layers.size(); ++i) {
    const LayerPlan& p = cfg_.layers[i];
    if (p.kv_shared) continue;
    const int64_t row_w = int64_t(p.kv_heads) * p.head_dim;
    std::vector<float> k(static_cast<size_t>(row_w)), v(static_cast<size_t>(row_w));
    for (int64_t pos = start; pos < new_length; ++pos) {
      for (int64_t j = 0; j < row_w; ++j) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        k[size_t(j)] = float(int32_t(state >> 40) - (1 << 23)) / float(1 << 23);
        v[size_t(j)] = -k[size_t(j)];
      }
      write(int(i), seq, pos, 1, k.data(), v.data());
    }
  }
  commit(seq, new_length);
}

void KvCache::cut_table(int layer, std::vector<int32_t>& table, int64_t positions) {
  const int64_t bt = opts_.block_tokens, keep = (positions + bt - 1) / bt;
  while (int64_t(table.size()) > keep) {
    release(layer, table.back());
    table.pop_back();
  }
  if (positions % bt == 0 || table.empty()) return;
  int32_t& last = table.back();  // later writes land here: it must be this sequence's alone
  if (refs_.at(layer).at(size_t(last)) == 1) return;
  const int32_t nb = take_block(layer);
  auto& pool = blocks_.at(layer);
  *pool[size_t(nb)] = *pool[size_t(last)];
  release(layer, last);
  last = nb;
}

void KvCache::truncate(int seq, int64_t new_length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("KV cache: unknown sequence " + std::to_string(seq));
  Sequence& s = it->second;
  if (new_length < 0 || new_length > s.length)
    throw Error("KV cache: truncating sequence " + std::to_string(seq) + " of " + std::to_string(s.length) +
                " positions to " + std::to_string(new_length));
  if (new_length == s.length) return;
  // A slot emptied here held, before its forgotten position, the one R positions older; the
  // window at new_length needs everything from new_length - W on, so the rollback must stay
  // within the extra slots.
  if (!s.rings.empty() && s.length - new_length > opts_.ring_extra_slots)
    throw Error("KV cache: rolling sequence " + std::to_string(seq) + " back " + std::to_string(s.length - new_length) +
                " positions would lose sliding-window positions (the rings keep " +
                std::to_string(opts_.ring_extra_slots) + " extra slots)");
  for (auto& [layer, table] : s.block_table) cut_table(layer, table, new_length);
  for (auto& [layer, table] : s.history) cut_table(layer, table, new_length);
  for (auto& [layer, ring] : s.rings)
    for (int64_t& p : ring->slot_pos)
      if (p >= new_length) p = -1;
  s.length = new_length;
}

void KvCache::commit(int seq, int64_t new_length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("KV cache: unknown sequence " + std::to_string(seq));
  it->second.length = new_length;
}

}  // namespace g4
