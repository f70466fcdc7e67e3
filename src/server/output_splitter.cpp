#include "server/output_splitter.h"

#include <array>
#include <cctype>

namespace g4::server {

namespace {

constexpr std::string_view kChannelOpen = "<|channel>", kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>", kCallClose = "<tool_call|>";
constexpr std::array<std::string_view, 3> kDropped = {"<turn|>", "<eos>", "<|tool_response>"};

bool is_ws(char c) { return std::isspace(uint8_t(c)) != 0; }

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

void OutputSplitter::emit(std::string_view s, OutputDelta& out) {
  const bool reasoning = state_ == State::reasoning;
  std::string& dst = reasoning ? out.reasoning : out.content;
  Section& sec = reasoning ? reasoning_ : content_;
  for (char c : s) {
    if (is_ws(c)) {
      if (sec.started) sec.held_ws += c;  // leading whitespace is dropped
      continue;
    }
    if (!sec.started && reasoning && reasoning_seen_) dst += '\n';
    sec.started = true;
    dst += sec.held_ws;
    sec.held_ws.clear();
    dst += c;
  }
}

void OutputSplitter::start_reasoning_block() {
  state_ = State::reasoning;
  reasoning_ = Section{};
}

void OutputSplitter::end_reasoning_block() {
  reasoning_seen_ = reasoning_seen_ || reasoning_.started;
  reasoning_ = Section{};
  state_ = State::content;
}

void OutputSplitter::run(OutputDelta& out, bool at_end) {
  for (;;) {
    bool more = false;
    switch (state_) {
      case State::content: more = step_content(out, at_end); break;
      case State::channel_name: more = step_channel_name(out, at_end); break;
      case State::reasoning: more = step_reasoning(out, at_end); break;
      case State::tool_call: more = step_tool_call(out, at_end); break;
    }
    if (!more) return;
  }
}

bool OutputSplitter::step_content(OutputDelta& out, bool at_end) {
  // Earliest marker of interest.
  size_t best = std::string::npos, best_len = 0;
  int which = -1;  // 0 channel, 1 call, 2 dropped
  auto consider = [&](std::string_view m, int w) {
    const size_t p = buf_.find(m);
    if (p < best) best = p, best_len = m.size(), which = w;
  };
  consider(kChannelOpen, 0);
  consider(kCallOpen, 1);
  for (auto d : kDropped) consider(d, 2);
  if (best == std::string::npos) {
    size_t hold = 0;
    if (!at_end) {
      for (auto m : {kChannelOpen, kCallOpen}) hold = std::max(hold, partial_suffix(buf_, m));
      for (auto d : kDropped) hold = std::max(hold, partial_suffix(buf_, d));
    }
    emit(std::string_view(buf_).substr(0, buf_.size() - hold), out);
    buf_.erase(0, buf_.size() - hold);
    return false;
  }
  emit(std::string_view(buf_).substr(0, best), out);
  buf_.erase(0, best + best_len);
  if (which == 0) {
    state_ = State::channel_name;
  } else if (which == 1) {
    state_ = State::tool_call;
  }
  return true;
}

bool OutputSplitter::step_channel_name(OutputDelta& out, bool at_end) {
  // The channel's name is the first line ("thought\n"); a block closed before any newline
  // holds only a name.
  const size_t nl = buf_.find('\n'), close = buf_.find(kChannelClose);
  if (close != std::string::npos && (nl == std::string::npos || close < nl)) {
    const std::string_view name(buf_.data(), close);
    start_reasoning_block();
    if (name != "thought") emit(name, out);  // not just a name: it is reasoning text
    buf_.erase(0, close + kChannelClose.size());
    end_reasoning_block();
    return true;
  }
  if (nl == std::string::npos) {
    if (!at_end) return false;
    start_reasoning_block();  // unclosed block without a newline: everything is reasoning
    if (buf_ == "thought") buf_.clear();
    return true;
  }
  const bool named = std::string_view(buf_).substr(0, nl).find('<') == std::string_view::npos;
  if (named) buf_.erase(0, nl + 1);
  start_reasoning_block();
  return true;
}

bool OutputSplitter::step_reasoning(OutputDelta& out, bool at_end) {
  const size_t close = buf_.find(kChannelClose);
  if (close == std::string::npos) {
    const size_t hold = at_end ? 0 : partial_suffix(buf_, kChannelClose);
    emit(std::string_view(buf_).substr(0, buf_.size() - hold), out);
    buf_.erase(0, buf_.size() - hold);
    return false;
  }
  emit(std::string_view(buf_).substr(0, close), out);
  buf_.erase(0, close + kChannelClose.size());
  end_reasoning_block();
  return true;
}

bool OutputSplitter::step_tool_call(OutputDelta& out, bool at_end) {
  const size_t close = buf_.find(kCallClose);
  if (close == std::string::npos) {
    if (!at_end) return false;
    out.tool_calls.push_back(text::unterminated_tool_call(buf_));
    buf_.clear();
    state_ = State::content;
    return false;
  }
  out.tool_calls.push_back(text::parse_tool_call(std::string_view(buf_).substr(0, close)));
  buf_.erase(0, close + kCallClose.size());
  state_ = State::content;
  return true;
}

OutputDelta OutputSplitter::push(std::string_view text) {
  OutputDelta out;
  buf_ += text;
  run(out, false);
  return out;
}

OutputDelta OutputSplitter::finish() {
  OutputDelta out;
  run(out, true);
  content_.held_ws.clear();
  reasoning_.held_ws.clear();
  return out;
}

}  // namespace g4::server
