// `g4 logits --draft-model`: draft logits [starts, k, vocab] against the shared drafter fixture,
// `g4 synth`'s drafter preset run through it, and the flag combinations it refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "test_util.h"

namespace g4 {
namespace {

std::string comma_list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

TEST(LogitsDraftCommand, WritesTheFixturesDraftLogits) {
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-31b-assistant";
  const auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  std::vector<int> starts;
  for (const auto& s : m["starts"]) starts.push_back(s["p"].get<int>());
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(0, test::g4_command("logits --model " + (dir / "target").string() + " --draft-model " +
                                    (dir / "assistant").string() + " --tokens " +
                                    comma_list(m["tokens"].get<std::vector<int>>()) + " --draft-at " +
                                    comma_list(starts) + " --draft-k 4 --out " + (tmp / "d.f32").string(),
                                &out))
      << out;
  const auto got = test::read_f32(tmp / "d.f32");
  const auto want = test::read_f32(dir / "draft_logits.f32");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::max_abs_diff(got.data(), want.data(), got.size()), 1e-3f);
  const auto& first = m["starts"][0];
  const std::string line = "start " + std::to_string(first["p"].get<int>()) + " (token " +
                           std::to_string(first["y"].get<int>()) + "): " +
                           comma_list(first["draft_tokens"].get<std::vector<int>>());
  std::string spaced = line;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  EXPECT_NE(out.find(spaced), std::string::npos) << out;
}

// `g4 quantize` writes a drafter as a gemma4-assistant GGUF. At f32 the centroid-head drafter
// drafts what the fixture says (every step within its 1e-3). As Q8_0 the dense-head drafter's first
// steps stay within the int8 rounding of the fixture (later steps follow their own argmax).
TEST(LogitsDraftCommand, QuantizedDrafterGgufDraftsAsTheFixture) {
  test::TempDir tmp;
  std::string out;
  for (const auto& [variant, type] : {std::pair<std::string, std::string>{"tiny-e-assistant", "f32"},
                                      {"tiny-31b-assistant", "q8_0"}}) {
    const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / variant;
    const auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
    std::vector<int> starts;
    for (const auto& s : m["starts"]) starts.push_back(s["p"].get<int>());
    const auto want = test::read_f32(dir / "draft_logits.f32");  // [S, k, V]
    const auto gguf = tmp / (variant + "-" + type + ".gguf");
    ASSERT_EQ(0, test::g4_command("quantize " + (dir / "assistant").string() + " " + gguf.string() + " --type " + type, &out))
        << out;
    ASSERT_EQ(0, test::g4_command("logits --model " + (dir / "target").string() + " --draft-model " + gguf.string() +
                                      " --tokens " + comma_list(m["tokens"].get<std::vector<int>>()) + " --draft-at " +
                                      comma_list(starts) + " --draft-k 4 --out " + (tmp / "d.f32").string(),
                                  &out))
        << out;
    const auto got = test::read_f32(tmp / "d.f32");
    ASSERT_EQ(got.size(), want.size());
    if (type == "f32") {
      EXPECT_NE(out.find("start 1 (token"), std::string::npos) << out;
      EXPECT_LE(test::max_abs_diff(got.data(), want.data(), got.size()), 1e-3f);
      continue;
    }
    const size_t V = m["vocab_size"].get<size_t>(), step = 4 * V;
    float first = 0;
    for (size_t s = 0; s < starts.size(); ++s)
      first = std::max(first, test::max_abs_diff(&got[s * step], &want[s * step], V));
    EXPECT_LE(first, 0.3f) << type;  // 0.15 measured; the manifest's smallest mistake (softcap) moves 0.47
    EXPECT_GT(first, 1e-5f) << "the Q8_0 file was not quantized";
  }
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-e-assistant";
  EXPECT_NE(0, test::g4_command("quantize " + (dir / "assistant").string() + " " + (tmp / "x.gguf").string() +
                                    " --type q4_k_m",
                                &out));
  EXPECT_NE(out.find("llama.cpp's mix is for models"), std::string::npos) << out;
}

TEST(LogitsDraftCommand, RunsASynthesizedPair) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --window 4 --out " + (tmp / "t").string(), &out)) << out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-assistant --window 4 --out " + (tmp / "d").string(), &out)) << out;
  ASSERT_EQ(0, test::g4_command("logits --model " + (tmp / "t").string() + " --draft-model " + (tmp / "d").string() +
                                    " --tokens 5,6,7,8,9,10,11,12,13,14 --draft-at 9 --draft-k 2 --out " +
                                    (tmp / "l.f32").string(),
                                &out))
      << out;
  EXPECT_EQ(test::read_f32(tmp / "l.f32").size(), 2u * 512u);
  // The target of another window is not this drafter's.
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --out " + (tmp / "t8").string(), &out)) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + (tmp / "t8").string() + " --draft-model " + (tmp / "d").string() +
                                    " --tokens 5,6,7 --draft-at 1",
                                &out));
  EXPECT_NE(out.find("text_config.sliding_window = 4 but target sliding_window = 8"), std::string::npos) << out;
}

TEST(LogitsDraftCommand, RefusesFlagsItCannotHonour) {
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-e-assistant";
  const std::string pair = "logits --model " + (dir / "target").string() + " --draft-model " + (dir / "assistant").string();
  std::string out;
  EXPECT_NE(0, test::g4_command(pair + " --tokens 1,2,3 --draft-at 3", &out));
  EXPECT_NE(out.find("--draft-at 3: a start needs the target's row p-1 and token p, so 1 <= p < 3"), std::string::npos)
      << out;
  EXPECT_NE(0, test::g4_command(pair + " --tokens 1,2,3 --draft-at 1 --threads 2", &out));
  EXPECT_NE(out.find("--threads: --draft-model runs the reference loops"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command(pair + " --tokens 1,2,3 --draft-at 1 --draft-k 0", &out));
  EXPECT_NE(out.find("--draft-k 0: must be in [1, 64]"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + (dir / "target").string() + " --tokens 1,2 --draft-at 1", &out));
  EXPECT_NE(out.find("--draft-at needs --draft-model"), std::string::npos) << out;
}

}  // namespace
}  // namespace g4
