// Gemma 4's value syntax inside tool declarations, calls and responses: JSON-like, but strings
// are wrapped in <|"|> instead of quotes, object keys are usually bare, and the chat template
// writes keys in Jinja dictsort order (case-insensitive). Shared by the chat template (writing)
// and the output parser (reading, in whatever order the model wrote them).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace g4::text {

inline constexpr std::string_view kToolQuote = "<|\"|>";

// Object members in Jinja `dictsort` order: by key, case-insensitively.
std::vector<std::pair<std::string, const nlohmann::json*>> dictsort(const nlohmann::json& object);

// The template's format_argument: null, true/false, numbers as JSON, strings as <|"|>s<|"|>,
// objects {k:v,...} (keys wrapped in <|"|> when escape_keys), arrays [v,...].
void format_tool_value(std::string& out, const nlohmann::json& value, bool escape_keys);

// Parses one value in that syntax starting at text[pos]; advances pos. Throws g4::Error with a
// message naming the offset on malformed input. Object members keep the order they were written
// in (a tool call's arguments come back in the order the model generated them).
nlohmann::ordered_json parse_tool_value(std::string_view text, size_t& pos);

// The JSON text of a value in that syntax that was cut short (max_tokens, a deadline): what
// OpenAI returns as a partial `arguments` string. Everything written so far is converted as
// parse_tool_value + dump() would write it (keys quoted, strings escaped, whitespace outside
// strings dropped, a finished number normalised), and the unfinished last piece as far as it
// goes: an open string or key without its closing quote, a number or literal as written. Open
// objects and arrays are not closed. A <|"|> marker split at the very end is left out. Never throws.
std::string tool_value_json_prefix(std::string_view text);

}  // namespace g4::text
