#include "text/tool_syntax.h"

#include <algorithm>
#include <cctype>

#include "platform/error.h"

namespace g4::text {

using json = nlohmann::json;

static std::string lower(const std::string& s) {
  std::string l = s;
  for (char& c : l) c = char(std::tolower(uint8_t(c)));
  return l;
}

std::vector<std::pair<std::string, const json*>> dictsort(const json& object) {
  std::vector<std::pair<std::string, const json*>> items;
  if (!object.is_object()) return items;
  for (auto it = object.begin(); it != object.end(); ++it) items.emplace_back(it.key(), &it.value());
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
  return items;
}

void format_tool_value(std::string& out, const json& v, bool escape_keys) {
  if (v.is_null()) {
    out += "null";
  } else if (v.is_string()) {
    out += kToolQuote;
    out += v.get_ref<const std::string&>();
    out += kToolQuote;
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, value] : dictsort(v)) {
      if (!first) out += ',';
      first = false;
      if (escape_keys) out.append(kToolQuote).append(k).append(kToolQuote);
      else out += k;
      out += ':';
      format_tool_value(out, *value, escape_keys);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      format_tool_value(out, v[i], escape_keys);
    }
    out += ']';
  } else {
    out += v.dump();  // numbers
  }
}

namespace {

[[noreturn]] void fail(std::string_view text, size_t pos, const std::string& what) {
  std::string near(text.substr(pos, 24));
  throw Error(what + " at offset " + std::to_string(pos) + (near.empty() ? " (end of input)" : " near \"" + near + "\""));
}

void skip_space(std::string_view t, size_t& p) {
  while (p < t.size() && std::isspace(uint8_t(t[p]))) ++p;
}

bool starts(std::string_view t, size_t p, std::string_view s) { return t.substr(p, s.size()) == s; }

std::string parse_quoted(std::string_view t, size_t& p) {
  const size_t start = p + kToolQuote.size();
  const size_t end = t.find(kToolQuote, start);
  if (end == std::string_view::npos) fail(t, p, "unterminated <|\"|> string");
  p = end + kToolQuote.size();
  return std::string(t.substr(start, end - start));
}

std::string parse_key(std::string_view t, size_t& p) {
  skip_space(t, p);
  if (starts(t, p, kToolQuote)) return parse_quoted(t, p);
  if (p < t.size() && t[p] == '"') {  // a JSON-quoted key, tolerated
    const size_t end = t.find('"', p + 1);
    if (end == std::string_view::npos) fail(t, p, "unterminated quoted key");
    std::string k(t.substr(p + 1, end - p - 1));
    p = end + 1;
    return k;
  }
  const size_t start = p;
  while (p < t.size() && t[p] != ':' && t[p] != ',' && t[p] != '}' && t[p] != '{' && !std::isspace(uint8_t(t[p]))) ++p;
  if (p == start) fail(t, p, "expected a key");
  return std::string(t.substr(start, p - start));
}

}  // namespace

nlohmann::ordered_json parse_tool_value(std::string_view t, size_t& p) {
  using ojson = nlohmann::ordered_json;  // members in the order they were written
  skip_space(t, p);
  if (p >= t.size()) fail(t, p, "expected a value");
  if (starts(t, p, kToolQuote)) return parse_quoted(t, p);
  const char c = t[p];
  if (c == '{') {
    ojson obj = ojson::object();
    ++p;
    skip_space(t, p);
    if (p < t.size() && t[p] == '}') {
      ++p;
      return obj;
    }
    for (;;) {
      std::string key = parse_key(t, p);
      skip_space(t, p);
      if (p >= t.size() || t[p] != ':') fail(t, p, "expected ':' after key \"" + key + "\"");
      ++p;
      obj[key] = parse_tool_value(t, p);
      skip_space(t, p);
      if (p < t.size() && t[p] == ',') {
        ++p;
        continue;
      }
      if (p < t.size() && t[p] == '}') {
        ++p;
        return obj;
      }
      fail(t, p, "expected ',' or '}' in object");
    }
  }
  if (c == '[') {
    ojson arr = ojson::array();
    ++p;
    skip_space(t, p);
    if (p < t.size() && t[p] == ']') {
      ++p;
      return arr;
    }
    for (;;) {
      arr.push_back(parse_tool_value(t, p));
      skip_space(t, p);
      if (p < t.size() && t[p] == ',') {
        ++p;
        continue;
      }
      if (p < t.size() && t[p] == ']') {
        ++p;
        return arr;
      }
      fail(t, p, "expected ',' or ']' in array");
    }
  }
  if (c == '"') {  // a JSON string, tolerated
    size_t end = p + 1;
    while (end < t.size() && t[end] != '"') end += t[end] == '\\' ? 2 : 1;
    if (end >= t.size()) fail(t, p, "unterminated string");
    ojson s = ojson::parse(t.substr(p, end + 1 - p), nullptr, false);
    if (s.is_discarded()) fail(t, p, "invalid string");
    p = end + 1;
    return s;
  }
  // A literal: true / false / null / a number.
  const size_t start = p;
  while (p < t.size() && t[p] != ',' && t[p] != '}' && t[p] != ']' && !std::isspace(uint8_t(t[p]))) ++p;
  const std::string_view word = t.substr(start, p - start);
  if (word == "true") return true;
  if (word == "false") return false;
  if (word == "null") return nullptr;
  ojson num = ojson::parse(word, nullptr, false);
  if (word.empty() || num.is_discarded() || !num.is_number()) fail(t, start, "unexpected \"" + std::string(word) + "\"");
  return num;
}

}  // namespace g4::text
