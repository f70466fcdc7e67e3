// Splits what Gemma 4 generated (decoded with special tokens kept) into thinking, answer and
// tool calls:
//   <|channel>thought\n...<channel|>             -> thinking (an unclosed block runs to the end)
//   <|tool_call>call:NAME{k:v,...}<tool_call|>   -> ToolCall{name, arguments as JSON, members in written order}
//   the rest, cut at <turn|> / <eos> and without <|tool_response>, trimmed -> content
// A malformed call does not throw: it becomes a ToolCall with `error` set and the raw text kept,
// so a server can report it (tool_call_json gives the error object). A call the output ends
// inside (no <tool_call|>) is such an error, marked `unterminated`: when max_tokens cut it,
// parse_cut_tool_call makes it the partial call OpenAI returns instead.
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
  bool unterminated = false;  // the output ended inside the call (no <tool_call|>)
  // Cut short (parse_cut_tool_call): ok(), but its arguments are only the JSON text written so
  // far, in partial_arguments (usually not parseable); `arguments` is unused.
  bool cut = false;
  std::string partial_arguments;
  bool ok() const { return error.empty(); }
  // The arguments as the JSON string an OpenAI response carries.
  std::string arguments_json() const { return cut ? partial_arguments : arguments.dump(); }
};

struct ParsedOutput {
  std::string thinking;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

ParsedOutput parse_model_output(std::string_view text);

// Parses the inside of one <|tool_call>...<tool_call|> ("call:NAME{...}").
ToolCall parse_tool_call(std::string_view inside);

// The call an output ends inside (no <tool_call|>): parse_tool_call's, as an error marked
// `unterminated`.
ToolCall unterminated_tool_call(std::string_view inside);

// The call that generation cut short (max_tokens) inside a <|tool_call>: `inside` is the text
// after it. Nothing written is dropped: the name as far as it got (empty when cut inside
// "call:"), and partial_arguments, the arguments' JSON text so far (tool_value_json_prefix;
// empty before the "{"). Text that cannot be the start of a call gives parse_tool_call's error.
ToolCall parse_cut_tool_call(std::string_view inside);

// {"name": ..., "arguments": {...}}  or  {"error": {"message": ..., "raw": ...}}.
nlohmann::json tool_call_json(const ToolCall& call);

}  // namespace g4::text
