// Streaming split of generated text into answer, thinking and tool calls, as text arrives piece by
// piece (the same split text::parse_model_output makes on the whole output):
//   <|channel>NAME\n...<channel|>   -> reasoning (the channel name line dropped)
//   <|tool_call>call:F{...}<tool_call|> -> one tool call, parsed when its closing marker arrives
//   <turn|>, <eos>, <|tool_response> -> dropped; everything else -> content
// Content and reasoning are trimmed like parse_model_output does: leading whitespace is dropped and
// trailing whitespace is held until more text follows it. A marker split across pieces is held back
// until it is complete or proven not to be a marker, so no chunk ever shows half a control token.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "text/output_parser.h"

namespace g4::server {

struct OutputDelta {
  std::string content;
  std::string reasoning;
  std::vector<text::ToolCall> tool_calls;  // completed calls (ok() or with error)
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

class OutputSplitter {
 public:
  OutputDelta push(std::string_view text);
  OutputDelta finish();  // flushes what is held; an unterminated tool call comes out with an error

 private:
  enum class State { content, channel_name, reasoning, tool_call };
  // Classifies buf_ state by state until it needs more text (or, at_end, has used it all).
  void run(OutputDelta& out, bool at_end);
  // One step in the current state; false when run() should stop and wait for more text.
  bool step_content(OutputDelta& out, bool at_end);
  bool step_channel_name(OutputDelta& out, bool at_end);
  bool step_reasoning(OutputDelta& out, bool at_end);
  bool step_tool_call(OutputDelta& out, bool at_end);
  void emit(std::string_view s, OutputDelta& out);
  State state_ = State::content;
  std::string buf_;          // text not yet classified
  // Content is one section over the whole output (trimmed once, like parse_model_output);
  // each thinking block is its own section, blocks joined by "\n".
  struct Section {
    std::string held_ws;  // trailing whitespace, held until more text follows
    bool started = false; // a non-whitespace character was emitted
  };
  Section content_, reasoning_;
  bool reasoning_seen_ = false;  // some earlier thinking block had text
  void start_reasoning_block();
  void end_reasoning_block();
};

}  // namespace g4::server
