// Grammar -> GBNF text: printing the rules back in the form parse_gbnf reads (grammar.cpp holds
// the parser).
#include <cstdio>

#include "engine/grammar.h"

namespace g4::grammar {

namespace {

// One code point inside a character class.
void append_class_char(std::string& out, uint32_t cp) {
  if (cp == '"' || cp == '\\' || cp == ']' || cp == '-' || cp == '^' || cp == '[') {
    out += '\\';
    out += char(cp);
  } else if (cp < 0x20 || cp >= 0x7F) {
    char buf[12];
    if (cp <= 0xFF) std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    else if (cp <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
    out += buf;
  } else {
    out += char(cp);
  }
}

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  for (char ch : utf8) {
    const uint8_t c = uint8_t(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string Grammar::to_text() const {
  std::string out;
  for (const auto& r : rules) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a) out += " |";
      if (r.alternatives[a].empty()) out += " \"\"";
      for (const auto& e : r.alternatives[a]) {
        out += ' ';
        if (e.kind == Element::Kind::rule) {
          out += rules[size_t(e.id)].name;
        } else if (e.kind == Element::Kind::token) {
          out += "<[" + std::to_string(e.id) + "]>";
        } else if (!e.negated && e.ranges.size() == 1 && e.ranges[0].lo == e.ranges[0].hi) {
          out += gbnf_literal(utf8_of(e.ranges[0].lo));
        } else if (e.negated && e.ranges.empty()) {
          out += '.';
        } else {
          out += e.negated ? "[^" : "[";
          for (const auto& rg : e.ranges) {
            append_class_char(out, rg.lo);
            if (rg.hi != rg.lo) {
              out += '-';
              append_class_char(out, rg.hi);
            }
          }
          out += ']';
        }
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace g4::grammar
