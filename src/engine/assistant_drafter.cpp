#include "engine/assistant_drafter.h"

#include <algorithm>
#include <cmath>

#include "model/assistant_step.h"

namespace g4 {

float draft_confidence(const std::vector<float>& logits, const std::vector<int>& candidates) {
  auto logit = [&](size_t i) { return candidates.empty() ? logits[i] : logits[size_t(candidates[i])]; };
  const size_t n = candidates.empty() ? logits.size() : candidates.size();
  if (n == 0) return 0.0f;
  float top = logit(0);
  for (size_t i = 1; i < n; ++i) top = std::max(top, logit(i));
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += std::exp(double(logit(i)) - double(top));
  return float(1.0 / z);
}

std::vector<int> AssistantDrafter::propose(const DraftContext& c, int k) {
  std::vector<int> out;
  if (!c.kv || c.hidden.empty() || c.position() < 1) return out;
  const blocks::Exec ex = c.exec ? *c.exec : blocks::Exec{};
  std::vector<float> h(c.hidden.begin(), c.hidden.end());
  int token = c.pending;
  for (int step = 0; step < k; ++step) {
    DraftStep d = draft_step(a_, target_, *c.kv, c.kv_seq, c.position(), token, h.data(), ex);
    if (draft_confidence(d.logits, d.candidates) < p_min_) break;
    out.push_back(d.token);
    token = d.token;
    h = std::move(d.h_next);
  }
  return out;
}

}  // namespace g4
