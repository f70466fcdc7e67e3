// Cost of a grammar's token mask over the 262,144-token Gemma vocabulary, per decoded token:
// a JSON-schema grammar is walked by sampling uniformly among the allowed tokens (strings,
// numbers, keys and enums all visited); each iteration is one fill_mask + accept. The first
// visit of a context builds its cached mask (reported separately as BM_GrammarMaskCold).
// Uses ../shared/fixtures/tokenizer/gemma3 (or $G4_SHARED).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "text/tokenizer.h"

namespace {

using namespace g4;

const std::shared_ptr<const grammar::GrammarVocab>& gemma_vocab() {
  static const auto v = [] {
    const char* env = std::getenv("G4_SHARED");
    const auto dir = std::filesystem::path(env ? env : G4_SHARED_DIR) / "fixtures" / "tokenizer" / "gemma3";
    return grammar::GrammarVocab::from_tokenizer(text::Tokenizer::from_dir(dir));
  }();
  return v;
}

std::string schema_gbnf() {
  return grammar::json_schema_gbnf(nlohmann::json::parse(R"({"type":"object","additionalProperties":false,
    "required":["name","age","tags","address"],
    "properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer"},
      "tags":{"type":"array","items":{"enum":["alpha","beta","gamma"]},"maxItems":4},
      "address":{"type":"object","required":["city","zip"],
                 "properties":{"city":{"type":"string","maxLength":16},"zip":{"type":"string","maxLength":8}}}}})"));
}

// One step: mask, then a uniformly drawn allowed token (restart when the grammar is done).
void run_steps(benchmark::State& state, bool fresh_grammar_each_time) {
  const auto vocab = gemma_vocab();
  const std::string text = schema_gbnf();
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(text), vocab);
  auto m = std::make_unique<grammar::GrammarMatcher>(g);
  grammar::TokenMask mask;
  std::mt19937 rng(1);
  const std::vector<int> ends = {1};
  std::vector<int> allowed;
  int64_t steps = 0;
  for (auto _ : state) {
    m->fill_mask(mask, ends);
    state.PauseTiming();
    allowed.clear();
    for (int t = 0; t < mask.size(); ++t)
      if (mask.test(t)) allowed.push_back(t);
    const int t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (t == 1 || !m->accept(t) || !m->can_continue()) {
      if (fresh_grammar_each_time) g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(text), vocab);
      m = std::make_unique<grammar::GrammarMatcher>(g);
    }
    ++steps;
    state.ResumeTiming();
  }
  state.counters["contexts"] = double(g->stats().contexts);
}

void BM_GrammarMaskWarm(benchmark::State& state) { run_steps(state, false); }
void BM_GrammarMaskCold(benchmark::State& state) { run_steps(state, true); }
BENCHMARK(BM_GrammarMaskWarm)->Unit(benchmark::kMicrosecond)->Iterations(3000);
BENCHMARK(BM_GrammarMaskCold)->Unit(benchmark::kMicrosecond)->Iterations(300);

}  // namespace
