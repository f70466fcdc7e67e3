// The Gemma 4 assistant model as a draft source (model/assistant_step.h does the arithmetic):
// k sequential draft steps at the pending token's position over the target's cache, starting
// from the pending token and the target's final-normed hidden row that chose it. Drafting stops
// at the first step whose most likely token falls below p_min (the drafter is unsure).
#pragma once
#include "engine/drafter.h"
#include "model/assistant.h"

namespace g4 {

class AssistantDrafter : public Drafter {
 public:
  AssistantDrafter(const AssistantModel& assistant, const Model& target, float p_min)
      : a_(assistant), target_(target), p_min_(p_min) {}
  std::vector<int> propose(const DraftContext& c, int k) override;
  std::string name() const override { return "draft"; }
  bool needs_hidden() const override { return true; }
  bool costly() const override { return true; }

 private:
  const AssistantModel& a_;
  const Model& target_;
  float p_min_;
};

// The probability of a step's most likely token: a softmax over the candidates when the
// centroid head chose some (the others are placeholders), else over the whole vocabulary.
float draft_confidence(const std::vector<float>& logits, const std::vector<int>& candidates);

}  // namespace g4
