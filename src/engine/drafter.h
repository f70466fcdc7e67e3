// Draft sources for speculative decoding (the simple ones live in draft_sources.cpp; the
// assistant model in assistant_drafter.h). A drafter proposes tokens to follow a sequence; the
// engine feeds them beside the sequence's pending token in one batched step and keeps only those
// plain decoding would have produced (engine.cpp), so no drafter can change an answer, only how
// many tokens one pass over the weights yields.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/executor.h"
#include "model/kv_store.h"

namespace g4 {

// What a drafter sees of one sequence: its tokens so far, oldest first: the prompt, then the
// generated tokens, the last of which (`pending`) is sampled but not yet fed.
struct DraftContext {
  std::span<const int> prompt;
  std::span<const int> generated;  // fed generated tokens
  int pending = -1;
  // The pending token's absolute position: every token before it is in the cache.
  int64_t position() const { return int64_t(prompt.size() + generated.size()); }
  // For drafters that read the target (needs_hidden): its cache, where positions [0, position())
  // of sequence kv_seq are committed, the final-normed hidden row [H] that chose `pending`, and
  // the engine's kernels.
  const KvStore* kv = nullptr;
  int kv_seq = -1;
  std::span<const float> hidden = {};
  const blocks::Exec* exec = nullptr;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `k` tokens proposed to follow the pending token (fewer, or none, when unsure).
  virtual std::vector<int> propose(const DraftContext& c, int k) = 0;
  virtual std::string name() const = 0;
  // Whether propose() reads DraftContext::hidden (the engine then keeps each sequence's row).
  virtual bool needs_hidden() const { return false; }
  // Whether proposing costs real work even when it yields nothing (a drafter model): an empty
  // proposal then counts as a miss for the draft length (speculative.h, DraftLength).
  virtual bool costly() const { return false; }
};

// Prompt lookup: the longest suffix of the sequence (up to `max_ngram` tokens, at least
// `min_ngram`) that occurred before proposes the tokens that followed its latest occurrence
// (continued periodically where they run into the end: a repeating run drafts its repetition).
// Copy-heavy work (edits, retrieval answers, code) repeats long runs of its context.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int max_ngram = 4, int min_ngram = 2) : max_n_(max_ngram), min_n_(min_ngram) {}
  std::vector<int> propose(const DraftContext& c, int k) override;
  std::string name() const override { return "ngram"; }

 private:
  int max_n_, min_n_;
  std::vector<int> seq_;  // prompt + generated + pending (storage kept across calls)
};

// Proposes a known continuation (benchmarks' ceiling, tests' "true continuation" drafter): the
// tokens of `script` after the ones generated so far, as long as the sequence has followed it.
class ReplayDrafter : public Drafter {
 public:
  explicit ReplayDrafter(std::vector<int> script) : script_(std::move(script)) {}
  std::vector<int> propose(const DraftContext& c, int k) override;
  std::string name() const override { return "replay"; }

 private:
  std::vector<int> script_;
};

// Random tokens (tests' and g4 bench's drafter whose drafts are never right): k of them, or with
// `vary_length` between 0 and k, so that every rollback length occurs.
class RandomDrafter : public Drafter {
 public:
  RandomDrafter(int vocab, uint64_t seed, bool vary_length = false) : vocab_(vocab), vary_(vary_length), state_(seed) {}
  std::vector<int> propose(const DraftContext& c, int k) override;
  std::string name() const override { return "random"; }

 private:
  uint64_t next();  // splitmix64
  int vocab_;
  bool vary_;
  uint64_t state_;
};

}  // namespace g4
