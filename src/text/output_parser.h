// Splits what Gemma 4 generated (decoded with special tokens kept) into thinking, answer and
// tool calls:
//   <|channel>thought\n...<channel|>             -> thinking (an unclosed block runs to the end)
//   <|tool_call>call:NAME{k:v,...}<tool_call|>   -> ToolCall{name, arguments as JSON, members in written order}
//   the rest, cut at <turn|> / <eos> and without <|tool_response>, trimmed -> content
// A malformed call does not throw: it becomes a ToolCall with `error` set and the raw text kept,
// so a server can report it (tool_call_json gives the error object).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace g4::text {

struct ToolCall {
  std::string name;
  // In the order the model wrote the members (a forced call follows its schema's declared order).
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  std::string raw;    // the text between <|tool_call> and <tool_call|>
  std::string error;  // empty when the call parsed
  bool ok() const { return error.empty(); }
};

struct ParsedOutput {
  std::string thinking;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

ParsedOutput parse_model_output(std::string_view text);

// Parses the inside of one <|tool_call>...<tool_call|> ("call:NAME{...}").
ToolCall parse_tool_call(std::string_view inside);

// {"name": ..., "arguments": {...}}  or  {"error": {"message": ..., "raw": ...}}.
nlohmann::json tool_call_json(const ToolCall& call);

}  // namespace g4::text
