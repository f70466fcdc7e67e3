// Tokenizer throughput: encode MB/s on mixed text (prose, code, CJK, emoji, whitespace runs),
// decode and streaming-detokenize tokens/s, and the time to load Gemma's 33 MB tokenizer.json.
// Uses ../shared/fixtures/tokenizer/gemma3 (or $G4_SHARED); falls back to a synth tokenizer.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "text/detokenizer_stream.h"
#include "text/synth_tokenizer.h"
#include "text/tokenizer.h"

namespace {

std::filesystem::path gemma_dir() {
  const char* env = std::getenv("G4_SHARED");
  return std::filesystem::path(env ? env : G4_SHARED_DIR) / "fixtures" / "tokenizer" / "gemma3";
}

const g4::text::Tokenizer& tokenizer() {
  static const std::unique_ptr<g4::text::Tokenizer> tok = [] {
    if (std::filesystem::exists(gemma_dir() / "tokenizer.json"))
      return std::make_unique<g4::text::Tokenizer>(g4::text::Tokenizer::from_dir(gemma_dir()));
    const auto dir = std::filesystem::temp_directory_path() / "g4-bench-synth-tokenizer";
    g4::text::write_synth_tokenizer(dir, 262144);
    return std::make_unique<g4::text::Tokenizer>(g4::text::Tokenizer::from_dir(dir));
  }();
  return *tok;
}

// ~1 MB of mixed text, repeated from original samples of each kind.
const std::string& mixed_text() {
  static const std::string text = [] {
    const std::string prose =
        "The committee met on Tuesday to discuss the budget, and after a long debate it agreed to fund "
        "the new library. Residents said they were pleased, although some worried about the cost. ";
    const std::string code =
        "def tokenize(text: str) -> list[int]:\n    ids = []\n    for word in text.split():\n"
        "        ids.extend(vocab.get(word, [UNK]))\n    return ids\n\n"
        "int main(int argc, char** argv) {\n\tfor (int i = 0; i < argc; ++i) printf(\"%s\\n\", argv[i]);\n}\n";
    const std::string cjk = "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。北京是中国的首都。서울은 한국의 수도입니다. ";
    const std::string emoji = "Great job! 🎉👍🏽 Family: 👨‍👩‍👧‍👦 Flags: 🇫🇷🇯🇵 ";
    const std::string spaces = std::string(40, ' ') + "indented\n\n\n\n" + std::string(8, '\t') + "tabs   \r\n";
    std::string t;
    while (t.size() < (1 << 20)) t += prose + code + cjk + emoji + spaces;
    return t;
  }();
  return text;
}

void BM_EncodeMixed(benchmark::State& state) {
  const auto& tok = tokenizer();
  const auto& text = mixed_text();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(tokens);
}
BENCHMARK(BM_EncodeMixed)->Unit(benchmark::kMillisecond);

void BM_EncodeLongWord(benchmark::State& state) {
  const std::string word(size_t(state.range(0)), 'a');
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer().encode(word).data());
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeLongWord)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const auto ids = tokenizer().encode(mixed_text());
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer().decode(ids).data());
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(ids.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

void BM_StreamingDetokenize(benchmark::State& state) {
  const auto ids = tokenizer().encode(mixed_text());
  for (auto _ : state) {
    g4::text::StreamingDetokenizer s(tokenizer());
    size_t bytes = 0;
    for (int32_t id : ids) bytes += s.push(id).size();
    bytes += s.finish().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(ids.size()));
}
BENCHMARK(BM_StreamingDetokenize)->Unit(benchmark::kMillisecond);

void BM_LoadGemmaTokenizerJson(benchmark::State& state) {
  if (!std::filesystem::exists(gemma_dir() / "tokenizer.json")) {
    state.SkipWithError("no Gemma tokenizer.json fixture");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(g4::text::Tokenizer::from_dir(gemma_dir()).vocab().size());
}
BENCHMARK(BM_LoadGemmaTokenizerJson)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
