#include "text/output_parser.h"

#include <cctype>

#include "platform/error.h"
#include "text/tool_syntax.h"

namespace g4::text {

namespace {

constexpr std::string_view kChannelOpen = "<|channel>", kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>", kCallClose = "<tool_call|>";

std::string trim_ascii_space(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(uint8_t(s[b]))) ++b;
  while (e > b && std::isspace(uint8_t(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool name_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-' || c == '.'; }

void erase_all(std::string& s, std::string_view what) {
  for (size_t p; (p = s.find(what)) != std::string::npos;) s.erase(p, what.size());
}

}  // namespace

ToolCall parse_tool_call(std::string_view inside) {
  ToolCall call;
  call.raw = std::string(inside);
  const std::string_view t = inside;
  size_t p = 0;
  while (p < t.size() && std::isspace(uint8_t(t[p]))) ++p;
  if (t.substr(p, 5) != "call:") {
    call.error = "tool call does not start with \"call:\"";
    return call;
  }
  p += 5;
  const size_t name_start = p;
  while (p < t.size() && name_char(t[p])) ++p;
  call.name = std::string(t.substr(name_start, p - name_start));
  if (call.name.empty()) {
    call.error = "tool call has no function name after \"call:\"";
    return call;
  }
  if (p >= t.size() || t[p] != '{') {
    call.error = "tool call " + call.name + ": expected '{' after the name at offset " + std::to_string(p);
    return call;
  }
  try {
    call.arguments = parse_tool_value(t, p);
    while (p < t.size() && std::isspace(uint8_t(t[p]))) ++p;
    if (p != t.size()) call.error = "tool call " + call.name + ": unexpected text after the arguments at offset " + std::to_string(p);
  } catch (const Error& e) {
    call.error = "tool call " + call.name + ": " + e.what();
    call.arguments = nlohmann::ordered_json::object();
  }
  return call;
}

ToolCall unterminated_tool_call(std::string_view inside) {
  ToolCall call = parse_tool_call(inside);
  call.error = "unterminated tool call (no <tool_call|>)" + (call.error.empty() ? "" : ": " + call.error);
  call.unterminated = true;
  return call;
}

ToolCall parse_cut_tool_call(std::string_view inside) {
  const std::string_view t = inside;
  size_t p = 0;
  while (p < t.size() && std::isspace(uint8_t(t[p]))) ++p;
  ToolCall call;
  call.raw = std::string(inside);
  call.cut = call.unterminated = true;
  const std::string_view rest = t.substr(p);
  if (rest.size() < 5 && std::string_view("call:").starts_with(rest)) return call;  // cut inside "call:"
  if (rest.starts_with("call:")) {
    size_t end = p + 5;
    while (end < t.size() && name_char(t[end])) ++end;
    call.name = std::string(t.substr(p + 5, end - p - 5));
    if (end == t.size()) return call;  // cut inside the name
    if (t[end] == '{' && !call.name.empty()) {
      call.partial_arguments = tool_value_json_prefix(t.substr(end));
      return call;
    }
  }
  return unterminated_tool_call(inside);  // not the start of a call: the error it was
}

ParsedOutput parse_model_output(std::string_view text) {
  ParsedOutput out;
  std::string rest;  // text outside thinking and tool calls
  size_t at = 0;
  while (at < text.size()) {
    const size_t ch = text.find(kChannelOpen, at), tc = text.find(kCallOpen, at);
    const size_t next = std::min(ch, tc);
    rest += text.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    if (next == std::string_view::npos) break;
    if (next == ch) {
      size_t body = ch + kChannelOpen.size();
      const size_t close = text.find(kChannelClose, body);
      std::string_view block = text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
      // The channel's name ("thought") is the first line.
      if (const size_t nl = block.find('\n'); nl != std::string_view::npos && block.substr(0, nl).find('<') == std::string_view::npos)
        block.remove_prefix(nl + 1);
      else if (block == "thought")
        block = {};
      if (!out.thinking.empty()) out.thinking += "\n";
      out.thinking += trim_ascii_space(block);
      at = close == std::string_view::npos ? text.size() : close + kChannelClose.size();
    } else {
      const size_t body = tc + kCallOpen.size();
      const size_t close = text.find(kCallClose, body);
      if (close == std::string_view::npos) {
        out.tool_calls.push_back(unterminated_tool_call(text.substr(body)));
        at = text.size();
      } else {
        out.tool_calls.push_back(parse_tool_call(text.substr(body, close - body)));
        at = close + kCallClose.size();
      }
    }
  }
  for (std::string_view end : {std::string_view("<turn|>"), std::string_view("<eos>")})
    if (const size_t p = rest.find(end); p != std::string::npos) rest.erase(p);
  erase_all(rest, "<|tool_response>");
  out.content = trim_ascii_space(rest);
  return out;
}

nlohmann::json tool_call_json(const ToolCall& call) {
  if (call.ok()) return {{"name", call.name}, {"arguments", call.arguments}};
  return {{"error", {{"message", call.error}, {"raw", call.raw}}}};
}

}  // namespace g4::text
