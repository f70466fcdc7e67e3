// libFuzzer target: request-supplied grammars. The input is GBNF text (the `grammar` field) or,
// when it parses as JSON, a JSON Schema (response_format.json_schema.schema).
// Asserts: refusals are g4::Error with a message; an accepted grammar prints to text that parses
// again; a schema's grammar always parses; a matcher on a small vocabulary never allows a token
// its own accept() refuses, for a few steps.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "fuzz_util.h"

using namespace g4;

namespace {

std::shared_ptr<const grammar::GrammarVocab> small_vocab() {
  static const auto v = [] {
    std::vector<std::string> b = {"", ""};  // 0: end, 1: a special token
    for (int c = 1; c < 256; ++c) b.push_back(std::string(1, char(c)));
    for (const char* t : {"{\"", "\":", "\",", "ab", "true", "null", "é", "中", "  ", "\n  "}) b.push_back(t);
    std::vector<bool> special(b.size(), false);
    special[0] = special[1] = true;
    return std::make_shared<const grammar::GrammarVocab>(b, special);
  }();
  return v;
}

void exercise(const grammar::Grammar& g) {
  std::shared_ptr<grammar::CompiledGrammar> cg;
  try {
    cg = std::make_shared<grammar::CompiledGrammar>(g, small_vocab());
  } catch (const Error& e) {
    fuzz::check_error(e);  // <[ID]> naming a token this vocabulary lacks
    return;
  }
  grammar::GrammarMatcher m(cg);
  grammar::TokenMask mask;
  const std::vector<int> ends = {0};
  for (int step = 0; step < 8; ++step) {
    m.fill_mask(mask, ends);
    int pick = -1;
    for (int t = 1; t < mask.size(); ++t) {
      grammar::GrammarMatcher copy = m;
      G4_FUZZ_CHECK(mask.test(t) == copy.accept(t));
      if (mask.test(t) && pick < 0) pick = t;
    }
    if (pick < 0) break;
    G4_FUZZ_CHECK(m.accept(pick));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!schema.is_discarded()) {
      std::string text;
      try {
        text = grammar::json_schema_gbnf(schema);
      } catch (const grammar::SchemaError& e) {
        fuzz::check_error(e);
        return 0;
      }
      exercise(grammar::parse_gbnf(text));  // a schema's grammar must parse (left recursion aside)
      return 0;
    }
    const grammar::Grammar g = grammar::parse_gbnf(in);
    grammar::parse_gbnf(g.to_text());
    exercise(g);
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
