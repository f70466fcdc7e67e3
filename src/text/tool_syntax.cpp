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

namespace {

std::string json_string(std::string_view s) {  // s as a JSON string literal
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A string cut before its closing quote: its JSON literal without the closing '"', and without
// a trailing piece of a <|"|> marker (the marker is one token, so text rarely ends inside one).
std::string open_json_string(std::string_view s) {
  for (size_t n = std::min(s.size(), kToolQuote.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == kToolQuote.substr(0, n)) {
      s.remove_suffix(n);
      break;
    }
  std::string q = json_string(s);
  q.pop_back();
  return q;
}

}  // namespace

std::string tool_value_json_prefix(std::string_view t) {
  using ojson = nlohmann::ordered_json;
  std::string out;
  std::vector<char> open;   // '{' or '[' for each container not closed yet
  bool expect_key = false;  // at the start of an object member
  bool started = false;
  auto is_space = [](char c) { return std::isspace(uint8_t(c)) != 0; };
  for (size_t p = 0; p < t.size();) {
    const char c = t[p];
    if (is_space(c)) {
      ++p;
      continue;
    }
    if (started && open.empty()) break;  // the value is complete; what follows is not part of it
    started = true;
    if (starts(t, p, kToolQuote)) {  // a <|"|> string (or key)
      const size_t begin = p + kToolQuote.size(), end = t.find(kToolQuote, begin);
      if (end == std::string_view::npos) return out + open_json_string(t.substr(begin));
      out += json_string(t.substr(begin, end - begin));
      p = end + kToolQuote.size();
      expect_key = false;
    } else if (kToolQuote.substr(0, t.size() - p) == t.substr(p)) {  // a marker cut at the end
      return out;
    } else if (c == '{' || c == '[') {
      out += c;
      open.push_back(c);
      expect_key = c == '{';
      ++p;
    } else if (c == '}' || c == ']') {
      out += c;
      if (!open.empty()) open.pop_back();
      expect_key = false;
      ++p;
    } else if (c == ',' || c == ':') {
      out += c;
      expect_key = c == ',' && !open.empty() && open.back() == '{';
      ++p;
    } else if (c == '"') {  // a JSON string, tolerated as parse_tool_value does
      size_t end = p + 1;
      while (end < t.size() && t[end] != '"') end += t[end] == '\\' ? 2 : 1;
      if (end >= t.size()) return out + std::string(t.substr(p));
      const ojson s = ojson::parse(t.substr(p, end + 1 - p), nullptr, false);
      out += s.is_discarded() ? std::string(t.substr(p, end + 1 - p)) : s.dump(-1, ' ', false, ojson::error_handler_t::replace);
      p = end + 1;
      expect_key = false;
    } else {  // a bare key, or a literal (true, false, null, a number)
      const size_t begin = p;
      while (p < t.size() && t[p] != ',' && t[p] != '}' && t[p] != ']' && t[p] != '{' && !is_space(t[p]) &&
             !(expect_key && t[p] == ':'))
        ++p;
      const std::string_view word = t.substr(begin, p - begin);
      if (expect_key) {
        if (p == t.size()) return out + open_json_string(word);  // the key may go on
        out += json_string(word);
        expect_key = false;
        continue;
      }
      if (p == t.size()) return out + std::string(word);  // "tr", "12": may go on, so as written
      const ojson v = ojson::parse(word, nullptr, false);
      out += v.is_discarded() ? std::string(word) : v.dump();
    }
  }
  return out;
}

}  // namespace g4::text
