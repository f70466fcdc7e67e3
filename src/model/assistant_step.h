// One draft step of a Gemma 4 assistant drafter, and k of them in a row (the spec's draft loop).
// The drafter reads three things of the target: its embedding table, its final-normed hidden
// state (the LM-head input) of the row that chose the token, and the K/V the target's cache
// holds at the last KV-owning target layer of each layer type. It writes nothing to the cache.
// docs/speculative.md, "The assistant drafter", explains each rule.
#pragma once
#include <cstdint>
#include <vector>

#include "model/assistant.h"
#include "model/executor.h"
#include "model/kv_store.h"

namespace g4 {

struct DraftStep {
  // [V]. Dense head: y · E_dᵀ. Centroid head: the candidates' logits, every other token the
  // minimum candidate logit - 1 (as the reference fills them). No softcapping either way.
  std::vector<float> logits;
  std::vector<float> h_next;   // [H_t]: post_projection · y, the next step's hidden input
  std::vector<int> candidates;  // centroid head: top_k · V/C token ids, centroids by falling score
  int token = 0;                // greedy draft: the argmax of logits (lowest id on a tie)
};

// One step: token `token` at position `pos` of target sequence `seq`, recurrent state `hidden`
// [H_t] (the target's final-normed hidden row pos-1 on the first step, then the previous step's
// h_next). Reads the target's K/V of positions [0, pos) on full layers and the newest
// min(pos, W+1) of them on sliding layers (W = sliding_window), so a store must keep W+1
// sliding positions. Needs pos >= 1 and kv.length(seq) >= pos.
DraftStep draft_step(const AssistantModel& d, const Model& target, const KvStore& kv, int seq, int64_t pos, int token,
                     const float* hidden, const blocks::Exec& ex = {});

// k steps from (token, hidden), each fed the previous step's argmax and h_next, all at position
// `pos` over the same K/V.
std::vector<DraftStep> draft(const AssistantModel& d, const Model& target, const KvStore& kv, int seq, int64_t pos, int token,
                             const std::vector<float>& hidden, int k, const blocks::Exec& ex = {});

}  // namespace g4
