#include "cli/output_grammar.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>

#include "engine/json_schema_grammar.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

std::string read_grammar_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() > grammar::kMaxGrammarBytes) throw Error(path + ": larger than " + std::to_string(grammar::kMaxGrammarBytes) + " bytes");
  return bytes;
}

}  // namespace

bool wants_output_grammar(const Args& a) {
  const int given = int(a.has("--json-schema")) + int(a.has("--json-object")) + int(a.has("--grammar"));
  if (given > 1) throw Error("give at most one of --json-schema, --json-object, --grammar");
  return given == 1;
}

std::shared_ptr<grammar::CompiledGrammar> compile_output_grammar(const Args& a, const text::Tokenizer& tok) {
  std::string gbnf;
  if (auto f = a.get("--json-schema")) {
    const std::string bytes = read_grammar_file(*f);
    // ordered_json: properties are generated in the order the file declares them.
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) throw Error(*f + ": not valid JSON");
    try {
      gbnf = grammar::json_schema_gbnf(schema);
    } catch (const grammar::SchemaError& e) {
      throw Error(*f + ": " + e.what());
    }
  } else if (a.has("--json-object")) {
    gbnf = grammar::json_object_gbnf();
  } else {
    const std::string path = a.require("--grammar");
    gbnf = read_grammar_file(path);
    try {
      grammar::parse_gbnf(gbnf);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }
  return std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), grammar::GrammarVocab::from_tokenizer(tok));
}

}  // namespace g4::cli
