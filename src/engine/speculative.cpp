#include "engine/speculative.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace g4 {

const char* spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::Off: return "off";
    case SpecMode::Ngram: return "ngram";
    case SpecMode::Draft: return "draft";
  }
  return "off";
}

std::optional<SpecMode> parse_spec_mode(const std::string& s) {
  for (SpecMode m : {SpecMode::Off, SpecMode::Ngram, SpecMode::Draft})
    if (s == spec_mode_name(m)) return m;
  return std::nullopt;
}

void SpeculationStats::add(const SpeculationStats& o) {
  verify_steps += o.verify_steps;
  drafted += o.drafted;
  accepted += o.accepted;
  draft_seconds += o.draft_seconds;
  auto sum = [](std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); ++i) a[i] += b[i];
  };
  sum(accepted_at, o.accepted_at);
  sum(drafted_at, o.drafted_at);
}

nlohmann::json speculation_json(const SpeculationStats& s) {
  nlohmann::json at = nlohmann::json::array();
  for (size_t j = 0; j < s.drafted_at.size(); ++j)
    at.push_back(s.drafted_at[j] > 0 ? double(s.accepted_at[j]) / double(s.drafted_at[j]) : 0.0);
  // A verify step emits its accepted drafts plus one token of its own.
  const double per_step = s.verify_steps > 0 ? double(s.accepted + s.verify_steps) / double(s.verify_steps) : 0.0;
  return {{"verify_steps", s.verify_steps},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"acceptance", s.drafted > 0 ? double(s.accepted) / double(s.drafted) : 0.0},
          {"acceptance_at", at},
          {"tokens_per_step", per_step},
          {"draft_s", s.draft_seconds}};
}

int DraftLength::next() {
  if (pause_ > 0) {
    --pause_;
    return 0;
  }
  return k_;
}

void DraftLength::observe(int proposed, int accepted) {
  if (proposed <= 0) return;  // the source was unsure: nothing learned
  if (accepted == proposed) {
    k_ = std::min(k_max_, k_ + 1);
    backoff_ = 0;
    return;
  }
  if (accepted > 0) {
    k_ = accepted + 1;
    return;
  }
  // Nothing accepted: one more try with a single draft (cheap: a 2-row step), then a pause of
  // 8, 16, ... 128 steps while it keeps failing. On E4B a 5-row step costs up to 2.2x a 1-row
  // one, so a source that is always wrong must be asked rarely to stay within 5% of plain.
  if (k_ > 1) {
    k_ = 1;
    return;
  }
  backoff_ = std::min(128, std::max(8, backoff_ * 2));
  pause_ = backoff_;
}

}  // namespace g4
