// JSON Schema -> grammar text (GBNF, grammar.h), for response_format json_schema / json_object
// and for tool-call arguments.
//
// Supported: the subset OpenAI's strict mode accepts, and a little more:
//   type (one or a list), enum, const, anyOf, $ref to #, #/$defs/... or #/definitions/...,
//   object: properties, required, additionalProperties (false, true or absent: only the declared
//           properties are generated, which is valid in every case),
//   array: items, minItems, maxItems,
//   string: minLength, maxLength,
//   annotations that do not constrain: title, description, default, examples, $schema, $id,
//   $comment, deprecated, readOnly, writeOnly, strict.
// Anything else (pattern, format, minimum, oneOf, allOf, not, prefixItems, ...) is refused with
// a SchemaError naming the keyword's path, never skipped: a schema that g4 cannot guarantee is
// not answered as if it could.
//
// Generated text is bounded so that sampling always has a way to finish: numbers have at most
// 16 integer and 16 fraction digits, exponents at most 2 digits (every number fits a double),
// whitespace between tokens at most one newline and 8 spaces.
//
// An object's properties are generated in the schema's declared order (as OpenAI's strict mode
// and llama.cpp do: a schema that puts "reasoning" before "answer" relies on it), in both value
// syntaxes, then any required name the schema does not declare, in `required` order. That order
// exists only in the schema's text: a schema held in an nlohmann::json (a sorted map) has lost it,
// so schemas are taken as nlohmann::ordered_json; parse the schema text into one.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

#include "platform/error.h"

namespace g4::grammar {

// The schema keyword (as a JSON-pointer-like path: "properties.name.pattern") that was refused,
// with the reason in what().
class SchemaError : public Error {
 public:
  SchemaError(std::string path, const std::string& what) : Error(what), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

enum class ValueSyntax {
  json,        // RFC 8259
  gemma_tool,  // Gemma 4 tool syntax: strings between <|"|> tokens, bare object keys, no spaces
};

// Accumulates rules for one or more schemas into one grammar text.
class SchemaGrammarBuilder {
 public:
  // quote_token: the id of <|"|> (needed for ValueSyntax::gemma_tool).
  explicit SchemaGrammarBuilder(ValueSyntax syntax = ValueSyntax::json, int quote_token = -1);

  // Adds the rules of a schema; returns the name of the rule matching one value of it. `prefix`
  // keeps the rule names of several schemas apart. Throws SchemaError.
  std::string add_schema(const nlohmann::ordered_json& schema, const std::string& prefix);
  // The members and closing brace of an object schema whose "{" is already written (a forced
  // tool call's prompt ends with it). Throws SchemaError.
  std::string add_object_after_open_brace(const nlohmann::ordered_json& schema, const std::string& prefix);
  // Any JSON object (json_object mode).
  std::string add_any_object();
  // A rule of your own, as GBNF alternatives ("<[48]> \"call:\" ...").
  void add_rule(const std::string& name, const std::string& body);

  std::string text() const;  // every rule added, one per line

 private:
  std::string value(const nlohmann::ordered_json& schema, const std::string& path, const std::string& name_hint);
  std::string object(const nlohmann::ordered_json& schema, const std::string& path, const std::string& name_hint,
                     bool after_open_brace = false);
  std::string array(const nlohmann::ordered_json& schema, const std::string& path, const std::string& name_hint);
  std::string string_rule(const nlohmann::ordered_json& schema, const std::string& path, const std::string& name_hint);
  std::string literal(const nlohmann::ordered_json& value);  // GBNF for one constant value (its keys as written)
  std::string resolve_ref(const std::string& ref, const std::string& path);
  std::string primitive(const std::string& which);   // shared rules: string, number, ws, ...
  std::string fresh(const std::string& hint);
  void check_keywords(const nlohmann::ordered_json& schema, const std::string& path);

  ValueSyntax syntax_;
  int quote_token_;
  const nlohmann::ordered_json* root_ = nullptr;
  std::string prefix_;
  std::map<std::string, std::string> rules_;        // name -> body
  std::vector<std::string> order_;
  std::map<std::string, std::string> ref_rules_;    // "#/$defs/x" -> rule name
  std::set<std::string> names_;
};

// GBNF for: a value of `schema` (root rule "root"). Throws SchemaError.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema);
// GBNF for any JSON object (root rule "root").
std::string json_object_gbnf();

}  // namespace g4::grammar
