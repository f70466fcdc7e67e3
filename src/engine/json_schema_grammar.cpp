#include "engine/json_schema_grammar.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>

#include "engine/grammar.h"

namespace g4::grammar {

// Schemas keep their keys in the order they were written (see the header).
using json = nlohmann::ordered_json;

namespace {

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title",   "description", "default",  "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "strict"};
  return k;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {"type",       "enum",     "const",    "anyOf",     "$ref",
                                          "$defs",      "definitions", "properties", "required", "additionalProperties",
                                          "items",      "minItems", "maxItems", "minLength", "maxLength"};
  return k;
}

bool bare_key(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(std::isalnum(uint8_t(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// A non-negative integer keyword, at most kMaxRepeat.
int count_keyword(const json& schema, const char* key, const std::string& path, int fallback) {
  auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
    throw SchemaError(path + key, std::string("schema keyword '") + key + "' at '" + path + key +
                                      "' must be a non-negative integer");
  const uint64_t v = it->get<uint64_t>();
  if (v > uint64_t(kMaxRepeat))
    throw SchemaError(path + key, std::string("schema keyword '") + key + "' at '" + path + key + "' is " +
                                      std::to_string(v) + "; g4 supports at most " + std::to_string(kMaxRepeat));
  return int(v);
}

std::string repeat(const std::string& what, int min, int max) {  // max < 0: unbounded
  if (max < 0) return min == 0 ? "(" + what + ")*" : "(" + what + "){" + std::to_string(min) + ",}";
  if (min == max) return min == 0 ? "" : "(" + what + "){" + std::to_string(min) + "}";
  return "(" + what + "){" + std::to_string(min) + "," + std::to_string(max) + "}";
}

}  // namespace

SchemaGrammarBuilder::SchemaGrammarBuilder(ValueSyntax syntax, int quote_token)
    : syntax_(syntax), quote_token_(quote_token) {
  if (syntax_ == ValueSyntax::gemma_tool && quote_token_ < 0)
    throw Error("tool-call grammar: the vocabulary has no <|\"|> token");
}

void SchemaGrammarBuilder::add_rule(const std::string& name, const std::string& body) {
  if (!rules_.count(name)) order_.push_back(name);
  rules_[name] = body;
  names_.insert(name);
}

std::string SchemaGrammarBuilder::text() const {
  std::string out;
  for (const auto& n : order_) out += n + " ::= " + rules_.at(n) + "\n";
  return out;
}

std::string SchemaGrammarBuilder::fresh(const std::string& hint) {
  std::string base = prefix_;
  for (char c : hint) base += (std::isalnum(uint8_t(c)) ? c : '-');
  if (base.empty()) base = "r";
  std::string name = base;
  for (int k = 2; names_.count(name); ++k) name = base + "-" + std::to_string(k);
  names_.insert(name);
  return name;
}

std::string SchemaGrammarBuilder::primitive(const std::string& which) {
  const bool tool = syntax_ == ValueSyntax::gemma_tool;
  const std::string q = "<[" + std::to_string(quote_token_) + "]>";
  const std::string name = (tool ? "tool-" : "json-") + which;
  if (rules_.count(name)) return name;
  std::string body;
  if (which == "ws") {
    body = tool ? "\"\"" : "| \" \" | \"\\n\" \" \"{0,8}";
  } else if (which == "char") {
    body = tool ? "[^<] | \"<\" [^|<]"
                : "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )";
  } else if (which == "string") {
    body = tool ? q + " " + primitive("char") + "* " + q : "\"\\\"\" " + primitive("char") + "* \"\\\"\"";
  } else if (which == "integer") {
    body = "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )";
  } else if (which == "number") {
    body = primitive("integer") + " ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?";
  } else if (which == "boolean") {
    body = "\"true\" | \"false\"";
  } else if (which == "null") {
    body = "\"null\"";
  } else if (which == "value") {
    add_rule(name, "\"\"");  // placeholder: the object and array rules refer back to it
    body = primitive("object") + " | " + primitive("array") + " | " + primitive("string") + " | " + primitive("number") +
           " | " + primitive("boolean") + " | " + primitive("null");
  } else if (which == "object") {
    add_rule(name, "\"\"");
    const std::string ws = primitive("ws");
    // Tool syntax: bare keys (the parser reads up to ':'), or quoted ones.
    const std::string key = tool ? "( [a-zA-Z_] [a-zA-Z0-9_.-]{0,63} | " + primitive("string") + " )" : primitive("string");
    const std::string member = key + " " + ws + " \":\" " + ws + " " + primitive("value") + " " + ws;
    body = "\"{\" " + ws + " ( " + member + " ( \",\" " + ws + " " + member + " )* )? \"}\"";
  } else if (which == "array") {
    add_rule(name, "\"\"");
    const std::string ws = primitive("ws");
    const std::string item = primitive("value") + " " + ws;
    body = "\"[\" " + ws + " ( " + item + " ( \",\" " + ws + " " + item + " )* )? \"]\"";
  } else {
    throw Error("json schema grammar: unknown primitive " + which);
  }
  add_rule(name, body);
  return name;
}

std::string SchemaGrammarBuilder::literal(const json& v) {
  if (syntax_ == ValueSyntax::json) return gbnf_literal(v.dump());
  const std::string q = "<[" + std::to_string(quote_token_) + "]>";
  if (v.is_string()) return "( " + q + " " + gbnf_literal(v.get<std::string>()) + " " + q + " )";
  if (v.is_array()) {
    std::string out = "( \"[\"";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? " \",\" " : " ") + literal(v[i]);
    return out + " \"]\" )";
  }
  if (v.is_object()) {  // keys as the schema writes them, like the JSON syntax's dump()
    std::string out = "( \"{\"";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it, first = false) {
      const std::string key = bare_key(it.key()) ? gbnf_literal(it.key()) : q + " " + gbnf_literal(it.key()) + " " + q;
      out += (first ? " " : " \",\" ") + key + " \":\" " + literal(it.value());
    }
    return out + " \"}\" )";
  }
  return gbnf_literal(v.dump());
}

void SchemaGrammarBuilder::check_keywords(const json& schema, const std::string& path) {
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    if (supported_keywords().count(k) || annotation_keywords().count(k)) continue;
    throw SchemaError(path + k, "schema keyword '" + k + "' at '" + path + k +
                                    "' is not supported by g4's constrained decoding (supported: type, enum, const, "
                                    "anyOf, $ref, $defs, properties, required, additionalProperties, items, "
                                    "minItems, maxItems, minLength, maxLength)");
  }
}

std::string SchemaGrammarBuilder::resolve_ref(const std::string& ref, const std::string& path) {
  auto known = ref_rules_.find(ref);
  if (known != ref_rules_.end()) return known->second;
  const json* target = nullptr;
  if (ref == "#") {
    target = root_;
  } else if (ref.rfind("#/", 0) == 0) {
    try {
      target = &root_->at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      target = nullptr;
    }
  }
  if (!target)
    throw SchemaError(path + "$ref", "'$ref' at '" + path + "$ref' is \"" + ref +
                                         "\", which does not resolve inside this schema (only local refs: #, #/$defs/NAME)");
  const std::string name = fresh("ref-" + ref.substr(ref.rfind('/') + 1));
  ref_rules_[ref] = name;
  add_rule(name, "\"\"");  // placeholder for recursion
  add_rule(name, value(*target, ref.substr(1) + "/", ref.substr(ref.rfind('/') + 1)));
  return name;
}

std::string SchemaGrammarBuilder::add_schema(const json& schema, const std::string& prefix) {
  root_ = &schema;
  prefix_ = prefix;
  ref_rules_.clear();
  const std::string expr = value(schema, "", "value");
  const std::string name = fresh("value");
  add_rule(name, expr);
  root_ = nullptr;
  return name;
}

std::string SchemaGrammarBuilder::add_any_object() { return primitive("object"); }

std::string SchemaGrammarBuilder::value(const json& schema, const std::string& path, const std::string& hint) {
  if (std::count(path.begin(), path.end(), '/') > 128)
    throw SchemaError(path, "the schema nests deeper than 128 levels at '" + path + "'");
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return primitive("value");
    throw SchemaError(path.empty() ? "" : path.substr(0, path.size() - 1),
                      "the schema at '" + path + "' is false: no value matches it");
  }
  if (!schema.is_object())
    throw SchemaError(path, "the schema at '" + path + "' must be an object or a boolean");
  check_keywords(schema, path);
  if (auto r = schema.find("$ref"); r != schema.end()) {
    if (!r->is_string()) throw SchemaError(path + "$ref", "'$ref' at '" + path + "$ref' must be a string");
    for (auto it = schema.begin(); it != schema.end(); ++it)
      if (it.key() != "$ref" && !annotation_keywords().count(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        throw SchemaError(path + it.key(), "schema keyword '" + it.key() + "' beside '$ref' at '" + path +
                                               "' is not supported (put it inside the referenced schema)");
    return resolve_ref(r->get<std::string>(), path);
  }
  if (auto c = schema.find("const"); c != schema.end()) return literal(*c);
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array() || e->empty())
      throw SchemaError(path + "enum", "'enum' at '" + path + "enum' must be a non-empty array");
    std::string out = "( ";
    for (size_t i = 0; i < e->size(); ++i) out += (i ? " | " : "") + literal((*e)[i]);
    return out + " )";
  }
  if (auto a = schema.find("anyOf"); a != schema.end()) {
    if (!a->is_array() || a->empty())
      throw SchemaError(path + "anyOf", "'anyOf' at '" + path + "anyOf' must be a non-empty array of schemas");
    for (auto it = schema.begin(); it != schema.end(); ++it)
      if (it.key() != "anyOf" && !annotation_keywords().count(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        throw SchemaError(path + it.key(), "schema keyword '" + it.key() + "' beside 'anyOf' at '" + path +
                                               "' is not supported (move it into each alternative)");
    std::string out = "( ";
    for (size_t i = 0; i < a->size(); ++i)
      out += (i ? " | " : "") + value((*a)[i], path + "anyOf/" + std::to_string(i) + "/", hint + "-" + std::to_string(i));
    return out + " )";
  }
  std::vector<std::string> types;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const auto& x : *t) {
        if (!x.is_string()) throw SchemaError(path + "type", "'type' at '" + path + "type' must hold strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      throw SchemaError(path + "type", "'type' at '" + path + "type' must be a string or a non-empty array of strings");
    }
  } else if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties")) {
    types.push_back("object");
  } else if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) {
    types.push_back("array");
  } else if (schema.contains("minLength") || schema.contains("maxLength")) {
    types.push_back("string");
  } else {
    return primitive("value");
  }
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& ty = types[i];
    std::string alt;
    if (ty == "object") alt = object(schema, path, hint);
    else if (ty == "array") alt = array(schema, path, hint);
    else if (ty == "string") alt = string_rule(schema, path, hint);
    else if (ty == "number" || ty == "integer" || ty == "boolean" || ty == "null") alt = primitive(ty);
    else
      throw SchemaError(path + "type", "'type' at '" + path + "type' is \"" + ty +
                                           "\"; expected object, array, string, number, integer, boolean or null");
    out += (i ? " | " : "") + alt;
  }
  return types.size() == 1 ? out : "( " + out + " )";
}

std::string SchemaGrammarBuilder::string_rule(const json& schema, const std::string& path, const std::string& hint) {
  const int min = count_keyword(schema, "minLength", path, 0);
  const int max = count_keyword(schema, "maxLength", path, -1);
  if (max >= 0 && max < min)
    throw SchemaError(path + "maxLength", "'maxLength' at '" + path + "' is below 'minLength'");
  if (min == 0 && max < 0) return primitive("string");
  const bool tool = syntax_ == ValueSyntax::gemma_tool;
  const std::string q = tool ? "<[" + std::to_string(quote_token_) + "]>" : "\"\\\"\"";
  const std::string name = fresh(hint + "-string");
  add_rule(name, q + " " + repeat(primitive("char"), min, max) + " " + q);
  return name;
}

std::string SchemaGrammarBuilder::add_object_after_open_brace(const json& schema, const std::string& prefix) {
  root_ = &schema;
  prefix_ = prefix;
  ref_rules_.clear();
  if (!schema.is_object()) throw SchemaError("", "tool parameters must be an object schema");
  check_keywords(schema, "");
  if (auto t = schema.find("type"); t != schema.end() && *t != "object")
    throw SchemaError("type", "tool parameters must have \"type\": \"object\"");
  for (const char* k : {"$ref", "anyOf", "enum", "const"})
    if (schema.contains(k)) throw SchemaError(k, std::string("'") + k + "' at the top of tool parameters is not supported");
  const std::string name = object(schema, "", "args", /*after_open_brace=*/true);
  root_ = nullptr;
  return name;
}

std::string SchemaGrammarBuilder::object(const json& schema, const std::string& path, const std::string& hint,
                                         bool after_open_brace) {
  const json empty = json::object();
  const json& props = schema.contains("properties") ? schema["properties"] : empty;
  if (!props.is_object()) throw SchemaError(path + "properties", "'properties' at '" + path + "properties' must be an object");
  std::set<std::string> required;
  std::vector<std::string> required_order;
  if (auto r = schema.find("required"); r != schema.end()) {
    if (!r->is_array()) throw SchemaError(path + "required", "'required' at '" + path + "required' must be an array of strings");
    for (const auto& x : *r) {
      if (!x.is_string()) throw SchemaError(path + "required", "'required' at '" + path + "required' must hold strings");
      if (required.insert(x.get<std::string>()).second) required_order.push_back(x.get<std::string>());
    }
  }
  if (auto ap = schema.find("additionalProperties"); ap != schema.end() && !ap->is_boolean() && !ap->is_object())
    throw SchemaError(path + "additionalProperties",
                      "'additionalProperties' at '" + path + "additionalProperties' must be a boolean or a schema");
  // Declared members in declared order, then any required but undeclared ones (any value), in
  // `required` order: the order the members are generated in, in both syntaxes.
  json all = props;
  for (const auto& r : required_order)
    if (!all.contains(r)) all[r] = json::object();
  std::vector<std::pair<std::string, const json*>> members;
  for (auto it = all.begin(); it != all.end(); ++it) members.emplace_back(it.key(), &it.value());
  const std::string ws = primitive("ws");
  const std::string q = "<[" + std::to_string(quote_token_) + "]>";
  const size_t n = members.size();
  std::vector<std::string> kv(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& k = members[i].first;
    std::string key;
    if (syntax_ == ValueSyntax::json) key = gbnf_literal(json(k).dump());
    else key = bare_key(k) ? gbnf_literal(k) : q + " " + gbnf_literal(k) + " " + q;
    kv[i] = key + " " + ws + " \":\" " + ws + " " +
            value(*members[i].second, path + "properties/" + k + "/", hint + "-" + k) + " " + ws;
  }
  // tail(i, prev): the members from i on, `prev` saying whether one was written before (so a
  // comma is due). Optional members may be skipped; required ones may not.
  std::map<std::pair<size_t, bool>, std::string> memo;
  const std::string base = fresh(hint + "-obj");
  std::function<std::string(size_t, bool)> tail = [&](size_t i, bool prev) -> std::string {
    if (i == n) return "\"\"";
    auto m = memo.find({i, prev});
    if (m != memo.end()) return m->second;
    const std::string name = fresh(base + "-" + std::to_string(i) + (prev ? "c" : "f"));
    memo[{i, prev}] = name;
    const std::string take = (prev ? "\",\" " + ws + " " : std::string()) + kv[i] + " " + tail(i + 1, true);
    if (required.count(members[i].first)) add_rule(name, take);
    else add_rule(name, take + " | " + tail(i + 1, prev));
    return name;
  };
  const std::string body = (after_open_brace ? "" : "\"{\" ") + ws + " " + tail(0, false) + " \"}\"";
  add_rule(base, body);
  return base;
}

std::string SchemaGrammarBuilder::array(const json& schema, const std::string& path, const std::string& hint) {
  const int min = count_keyword(schema, "minItems", path, 0);
  const int max = count_keyword(schema, "maxItems", path, -1);
  if (max >= 0 && max < min) throw SchemaError(path + "maxItems", "'maxItems' at '" + path + "' is below 'minItems'");
  const json any = json::object();
  const json& items = schema.contains("items") ? schema["items"] : any;
  if (items.is_array())
    throw SchemaError(path + "items", "'items' at '" + path + "items' is an array (tuple form); not supported");
  const std::string ws = primitive("ws");
  const std::string item_name = fresh(hint + "-item");
  add_rule(item_name, value(items, path + "items/", hint + "-item") + " " + ws);
  const std::string more = "\",\" " + ws + " " + item_name;
  std::string body;
  if (max == 0) body = "\"[\" " + ws + " \"]\"";
  else if (min == 0) body = "\"[\" " + ws + " ( " + item_name + " " + repeat(more, 0, max < 0 ? -1 : max - 1) + " )? \"]\"";
  else body = "\"[\" " + ws + " " + item_name + " " + repeat(more, min - 1, max < 0 ? -1 : max - 1) + " \"]\"";
  const std::string name = fresh(hint + "-array");
  add_rule(name, body);
  return name;
}

std::string json_schema_gbnf(const json& schema) {
  SchemaGrammarBuilder b;
  const std::string v = b.add_schema(schema, "");
  b.add_rule("root", v);
  return b.text();
}

std::string json_object_gbnf() {
  SchemaGrammarBuilder b;
  b.add_rule("root", b.add_any_object());
  return b.text();
}

}  // namespace g4::grammar
