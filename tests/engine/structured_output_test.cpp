// Constrained decoding through the engine on a random-weight model (the tiny-e fixture with the
// synth Gemma 4 tokenizer): sampled at temperature 1, every completion must parse as JSON and
// validate against its schema. The validator below is written from the JSON Schema rules
// directly and shares nothing with the grammar compiler.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "declared_order.h"
#include "engine/engine.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "model/model.h"
#include "test_util.h"
#include "text/synth_tokenizer.h"
#include "text/tokenizer.h"
#include "text/tool_syntax.h"

namespace g4 {
namespace {

using nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

// "" when `v` is valid against `schema` (the subset g4 supports), else why not.
std::string validate(const json& v, const json& schema, const json& root, const std::string& at = "$") {
  if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": false schema";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const json& target = ref == "#" ? root : root.at(json::json_pointer(ref.substr(1)));
    return validate(v, target, root, at);
  }
  if (schema.contains("const") && v != schema["const"]) return at + ": not the const";
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) return at + ": not in enum";
  }
  if (schema.contains("anyOf")) {
    for (const auto& alt : schema["anyOf"])
      if (validate(v, alt, root, at).empty()) return "";
    return at + ": matches no anyOf branch";
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_string()) types.push_back(schema["type"]);
    else for (const auto& t : schema["type"]) types.push_back(t);
    bool ok = false;
    for (const auto& t : types) {
      ok = ok || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
           (t == "integer" && (v.is_number_integer() || v.is_number_unsigned())) || (t == "number" && v.is_number()) ||
           (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
    }
    if (!ok) return at + ": wrong type " + std::string(v.type_name());
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& r : schema.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        const std::string e = validate(it.value(), props[it.key()], root, at + "." + it.key());
        if (!e.empty()) return e;
      } else if (schema.value("additionalProperties", json(true)) == json(false)) {
        return at + ": additional property " + it.key();
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return at + ": too few items";
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return at + ": too many items";
    if (schema.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string e = validate(v[i], schema["items"], root, at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) return at + ": too short";
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) return at + ": too long";
  }
  return "";
}

TEST(JsonSchemaValidator, CatchesWhatItShould) {  // the validator itself can fail
  const json s = json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x"]}},
                                 "required":["a"],"additionalProperties":false})");
  EXPECT_EQ(validate(json::parse(R"({"a":1,"b":"x"})"), s, s), "");
  EXPECT_NE(validate(json::parse(R"({"a":1.5})"), s, s), "");
  EXPECT_NE(validate(json::parse(R"({"b":"x"})"), s, s), "");
  EXPECT_NE(validate(json::parse(R"({"a":1,"b":"y"})"), s, s), "");
  EXPECT_NE(validate(json::parse(R"({"a":1,"c":2})"), s, s), "");
}

// 32 schemas. Strings carry maxLength: a random-weight model over 512 tokens picks a closing
// quote about once in 500 steps, so an unbounded string runs to max_tokens ("length", cut
// output, as any engine does). Nested objects, arrays with bounds, enums, anyOf, $defs and recursion, integers,
// strings with escapes and non-ASCII constants, optional members.
std::vector<json> schemas() {
  const char* texts[] = {
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":8}},"required":["a"],"additionalProperties":false})",
      R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})",
      R"({"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]})",
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"none":{"type":"null"}},"required":["ok","none"]})",
      R"({"type":"object","properties":{"c":{"enum":["red","green","blue"]}},"required":["c"]})",
      R"({"type":"object","properties":{"c":{"const":"caf\u00e9 \"q\" \\ \u4e2d"}},"required":["c"]})",
      R"({"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":4}]}},"required":["v"]})",
      R"({"type":"object","properties":{"l":{"type":"array","items":{"type":"integer"},"maxItems":3}},"required":["l"]})",
      R"({"type":"object","properties":{"l":{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":4}},"required":["l"]})",
      R"({"type":"object","properties":{"o":{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"]}},"required":["o"]})",
      R"({"type":"object","properties":{"p":{"$ref":"#/$defs/pt"}},"required":["p"],"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}}})",
      R"({"type":"object","properties":{"s":{"type":"string","minLength":1,"maxLength":3}},"required":["s"]})",
      R"({"type":"object","properties":{"opt":{"type":"integer"},"req":{"type":"boolean"}},"required":["req"]})",
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":[]})",
      R"({"type":"array","items":{"type":"integer"},"maxItems":5})",
      R"({"type":"array","items":{"enum":[1,2,"three",null,true]},"minItems":1,"maxItems":3})",
      R"({"enum":["yes","no"]})",
      R"({"type":"integer"})",
      R"({"type":["integer","null"]})",
      R"({"type":"boolean"})",
      R"({"type":"object","properties":{"t":{"type":"array","items":{"$ref":"#/$defs/tag"},"maxItems":2}},"required":["t"],"$defs":{"tag":{"type":"string","maxLength":5}}})",
      R"({"type":"object","properties":{"deep":{"type":"object","properties":{"deeper":{"type":"object","properties":{"v":{"enum":[0,1]}},"required":["v"]}},"required":["deeper"]}},"required":["deep"]})",
      R"({"type":"object","properties":{"node":{"$ref":"#/$defs/n"}},"required":["node"],"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/n"}]}},"required":["v","next"]}}})",
      R"({"type":"object","properties":{"k":{"type":"string","maxLength":2},"m":{"type":"string","maxLength":2}},"required":["k","m"],"additionalProperties":false})",
      R"({"type":"object","properties":{"neg":{"type":"integer"},"f":{"type":"number"}},"required":["neg","f"]})",
      R"({"anyOf":[{"type":"object","properties":{"a":{"const":1}},"required":["a"]},{"type":"array","maxItems":1,"items":{"const":"\u00fc"}}]})",
      R"({"type":"object","properties":{"m":{"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":2},"maxItems":2}},"required":["m"]})",
      R"({"type":"object","properties":{"e":{"enum":["a\nb","tab\there","\u00e9t\u00e9"]}},"required":["e"]})",
      R"({"type":"object","properties":{"title":{"type":"string","maxLength":6,"description":"annotations are fine"}},"required":["title"],"title":"T"})",
      R"({"type":"object","properties":{"z":{"type":"object","properties":{},"additionalProperties":false}},"required":["z"]})",
      R"({"type":"object","properties":{"u":{"type":["string","integer"],"maxLength":3}},"required":["u"]})",
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"maxItems":2}},"required":["a"]})",
  };
  std::vector<json> out;
  for (const char* t : texts) out.push_back(json::parse(t));
  return out;
}

struct Completion {
  std::vector<int> tokens;
  std::string finish;
  bool done = false;
};

class StructuredOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    text::write_synth_tokenizer(dir_->path(), 512);
    tok_ = new text::Tokenizer(text::Tokenizer::from_dir(dir_->path()));
    model_ = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf").release();
    vocab_ = new std::shared_ptr<const grammar::GrammarVocab>(grammar::GrammarVocab::from_tokenizer(*tok_));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
    delete tok_;
    delete dir_;
  }
  // Runs the requests to the end on one engine (batched); returns each one's tokens.
  static std::vector<Completion> run(std::vector<GenerationRequest> reqs, EngineOptions o = {}) {
    o.max_seqs = 16;
    o.max_context = 1024;
    Engine engine(*model_, o);
    std::vector<Completion> out(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i)
      engine.submit(reqs[i], [&out, i](const GenerationEvent& e) {
        for (const auto& t : e.tokens) out[i].tokens.push_back(t.token);
        if (e.finished) out[i].finish = e.finish_reason, out[i].done = true;
      });
    engine.run_until_idle();
    return out;
  }
  std::string text_of(const std::vector<int>& tokens) const {
    std::vector<int32_t> ids;
    for (int t : tokens)
      if (t != 1 && t != 106) ids.push_back(t);  // the stop tokens are not part of the output
    return tok_->decode(ids);
  }
  static inline test::TempDir* dir_ = nullptr;
  static inline text::Tokenizer* tok_ = nullptr;
  static inline Model* model_ = nullptr;
  static inline std::shared_ptr<const grammar::GrammarVocab>* vocab_ = nullptr;
};

GenerationRequest sampled(uint64_t seed, int max_tokens) {
  GenerationRequest r;
  r.prompt = {2, 105, 170, 171, 172, 106};
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.sampling.max_tokens = max_tokens;
  r.sampling.stop_token_ids = {1, 106};
  return r;
}

TEST_F(StructuredOutput, ThousandSampledCompletionsValidateAgainstTheirSchemas) {
  const auto all = schemas();
  ASSERT_GE(all.size(), 30u);
  // 32 x 32 = 1024 completions. Under a sanitizer (CI's ASan and TSan stages, 5-15x slower) 8 per
  // schema, 256 in all: memory and thread checks need the paths, not the count.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int per_schema = 8;
#else
  const int per_schema = 32;
#endif
  int valid = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(grammar::json_schema_gbnf(all[k])), *vocab_);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < per_schema; ++i) {
      reqs.push_back(sampled(k * 1000 + uint64_t(i), 600));
      reqs.back().grammar = g;
    }
    const auto outs = run(reqs);
    for (const auto& c : outs) {
      const std::string text = text_of(c.tokens);
      ASSERT_EQ(c.finish, "stop") << "schema " << k << ": " << text;
      json v;
      try {
        v = json::parse(text);
      } catch (const json::exception& e) {
        FAIL() << "schema " << k << ": not JSON (" << e.what() << "): " << text;
      }
      const std::string why = validate(v, all[k], all[k]);
      ASSERT_EQ(why, "") << "schema " << k << ": " << text;
      ++valid;
    }
  }
  EXPECT_EQ(valid, int(all.size()) * per_schema);
}

// Properties come out in the schema's declared order, never sorted: at the top, through a $ref,
// inside an anyOf branch and in a nested object (declared_order.h).
TEST_F(StructuredOutput, PropertiesComeInDeclaredOrder) {
  const auto schema = nlohmann::ordered_json::parse(test::kDeclaredOrderSchema);
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(grammar::json_schema_gbnf(schema)), *vocab_);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    reqs.push_back(sampled(900 + uint64_t(i), 600));
    reqs.back().grammar = g;
  }
  int object_choices = 0, with_bonus = 0;
  for (const auto& c : run(reqs)) {
    const std::string text = text_of(c.tokens);
    ASSERT_EQ(c.finish, "stop") << text;
    const auto v = nlohmann::ordered_json::parse(text);
    bool object_choice = false;
    EXPECT_EQ(test::declared_order_mismatch(v, &object_choice), "") << text;
    object_choices += object_choice;
    with_bonus += v.contains("bonus");
  }
  EXPECT_GT(object_choices, 0);  // the anyOf object branch was generated at least once
  EXPECT_GT(with_bonus, 0);      // and the optional member
}

// The same in Gemma's tool-call syntax: a forced call's arguments, after "call:NAME{" (the chat
// template writes declared tools' keys sorted; a generated call follows the schema instead).
TEST_F(StructuredOutput, ToolArgumentsComeInDeclaredOrder) {
  const auto schema = nlohmann::ordered_json::parse(test::kDeclaredOrderSchema);
  const int quote = tok_->vocab().find("<|\"|>"), close = tok_->vocab().find("<tool_call|>");
  ASSERT_GE(quote, 0);
  ASSERT_GE(close, 0);
  grammar::SchemaGrammarBuilder b(grammar::ValueSyntax::gemma_tool, quote);
  b.add_rule("root", b.add_object_after_open_brace(schema, "t-") + " <[" + std::to_string(close) + "]>");
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(b.text()), *vocab_);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    reqs.push_back(sampled(950 + uint64_t(i), 600));
    reqs.back().grammar = g;
  }
  int object_choices = 0;
  for (const auto& c : run(reqs)) {
    std::vector<int32_t> ids;
    for (int t : c.tokens)
      if (t != close && t != 1 && t != 106) ids.push_back(t);
    const std::string text = "{" + tok_->decode(ids);
    ASSERT_EQ(c.finish, "stop") << text;
    size_t pos = 0;
    const auto v = text::parse_tool_value(text, pos);
    ASSERT_EQ(pos, text.size()) << text;
    bool object_choice = false;
    EXPECT_EQ(test::declared_order_mismatch(v, &object_choice), "") << text;
    object_choices += object_choice;
  }
  EXPECT_GT(object_choices, 0);
}

TEST_F(StructuredOutput, JsonObjectModeGivesAnObject) {
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(grammar::json_object_gbnf()), *vocab_);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i) {
    reqs.push_back(sampled(77 + uint64_t(i), 600));
    reqs.back().grammar = g;
  }
  for (const auto& c : run(reqs)) {
    if (c.finish == "length") continue;  // an unbounded object may outgrow max_tokens; it is then cut
    ASSERT_EQ(c.finish, "stop");
    EXPECT_TRUE(json::parse(text_of(c.tokens)).is_object()) << text_of(c.tokens);
  }
}

// With a grammar that allows every text, the masked path must give exactly the tokens of
// unconstrained decoding (sampled and greedy). Both runs ban the special and byte-fallback
// tokens, which such a grammar cannot allow (control tokens are not text; lone bytes may not be
// UTF-8), so that the comparison is about the mask machinery alone.
TEST_F(StructuredOutput, AllowEverythingGrammarMatchesUnconstrainedDecoding) {
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf("root ::= .*"), *vocab_);
  std::vector<int> banned;
  for (int t = 0; t < model_->config.vocab_size; ++t)
    if (t != 1 && t != 106 && (t >= (*vocab_)->size() || (*vocab_)->special(t) || tok_->vocab().type(t) == text::TokenType::Byte))
      banned.push_back(t);
  std::vector<GenerationRequest> free, masked;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r = sampled(500 + uint64_t(i), 48);
    if (i % 3 == 0) r.sampling.temperature = 0;
    r.sampling.banned_token_ids = banned;
    free.push_back(r);
    r.grammar = g;
    masked.push_back(r);
  }
  const auto a = run(free), b = run(masked);
  size_t total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].finish, b[i].finish);
    total += a[i].tokens.size();
  }
  EXPECT_GT(total, 200u);
}

// Speculation under a grammar: the drafts are not masked, so a drafter proposes tokens the grammar
// forbids, and an object closes in the middle of an accepted run. Sampled and greedy completions
// equal plain decoding's, token for token, with n-gram drafts and with a drafter replaying the
// true output (every draft accepted, the grammar ending inside the run).
TEST_F(StructuredOutput, SpeculationNeverChangesConstrainedOutput) {
  const auto all = schemas();
  std::vector<GenerationRequest> reqs;
  for (size_t k = 0; k < 8; ++k) {
    auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(grammar::json_schema_gbnf(all[k])), *vocab_);
    reqs.push_back(sampled(300 + k, 400));
    if (k % 4 == 0) reqs.back().sampling.temperature = 0;
    reqs.back().grammar = g;
  }
  const auto plain = run(reqs);
  EngineOptions ngram;
  ngram.speculative.mode = SpecMode::Ngram;
  EngineOptions replay;
  replay.speculative.mode = SpecMode::Draft;
  replay.speculative.k_max = 6;
  replay.speculative.make_drafter = [&](const GenerationRequest& r, int) -> std::unique_ptr<Drafter> {
    for (size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].sampling.seed == r.sampling.seed) return std::make_unique<ReplayDrafter>(plain[i].tokens);
    return nullptr;
  };
  for (const auto& o : {ngram, replay}) {
    const auto spec = run(reqs, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(plain[i].tokens, spec[i].tokens) << "request " << i << " mode " << spec_mode_name(o.speculative.mode);
      EXPECT_EQ(plain[i].finish, spec[i].finish);
    }
  }
}

}  // namespace
}  // namespace g4
