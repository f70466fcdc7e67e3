#include "engine/stop_matcher.h"

#include <algorithm>

namespace g4 {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::none: break;
  }
  return "";
}

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, std::vector<int> stop_token_ids, int max_tokens)
    : stop_strings_(std::move(stop_strings)), stop_token_ids_(std::move(stop_token_ids)), max_tokens_(max_tokens) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stop_strings_) longest_stop_ = std::max(longest_stop_, s.size());
}

StopMatcher::StopMatcher(const SamplingParams& params)
    : StopMatcher(params.stop_strings, params.stop_token_ids, params.max_tokens) {}

StopUpdate StopMatcher::finish(FinishReason reason, std::string text) {
  reason_ = reason;
  StopUpdate update;
  update.text = std::move(text);
  update.finished = true;
  update.reason = reason;
  return update;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

size_t StopMatcher::longest_partial_suffix() const {
  // Only a proper prefix of a stop string can be pending (a whole one would have matched).
  const size_t max_len = std::min(pending_.size(), longest_stop_ ? longest_stop_ - 1 : 0);
  const std::string_view text(pending_);
  for (size_t len = max_len; len > 0; --len) {
    const std::string_view suffix = text.substr(text.size() - len);
    for (const auto& stop : stop_strings_)
      if (stop.size() > len && std::string_view(stop).starts_with(suffix)) return len;
  }
  return 0;
}

StopUpdate StopMatcher::on_text(std::string_view text_piece) {
  if (finished()) return finish(reason_, "");
  // pending_ held no complete match before this piece, so a match must end inside the new bytes.
  const size_t old_size = pending_.size();
  pending_.append(text_piece);
  const std::string_view text(pending_);

  size_t best_end = std::string_view::npos, best_start = 0;
  const std::string* best_stop = nullptr;
  for (const auto& stop : stop_strings_) {
    // Earliest occurrence ending after old_size: start searching where such a match could begin.
    const size_t from = old_size >= stop.size() - 1 ? old_size - (stop.size() - 1) : 0;
    const size_t at = text.find(stop, from);
    if (at == std::string_view::npos) continue;
    const size_t end = at + stop.size();
    if (end < best_end || (end == best_end && at < best_start)) {
      best_end = end;
      best_start = at;
      best_stop = &stop;
    }
  }
  if (best_stop) {
    std::string before(text.substr(0, best_start));
    StopUpdate update = finish(FinishReason::stop, std::move(before));
    update.matched_stop = *best_stop;
    pending_.clear();
    return update;
  }

  const size_t hold = longest_partial_suffix();
  StopUpdate update;
  update.text.assign(text.substr(0, text.size() - hold));
  pending_.erase(0, text.size() - hold);
  return update;
}

StopUpdate StopMatcher::on_token(int token_id, std::string_view text_piece) {
  if (finished()) return finish(reason_, "");
  ++tokens_seen_;
  if (std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token_id) != stop_token_ids_.end()) {
    StopUpdate update = finish(FinishReason::stop, flush());
    update.matched_token = token_id;
    return update;
  }
  StopUpdate update = on_text(text_piece);
  if (update.finished) return update;
  if (tokens_seen_ >= max_tokens_) {
    std::string text = std::move(update.text);
    text += flush();
    return finish(FinishReason::length, std::move(text));
  }
  return update;
}

}  // namespace g4
