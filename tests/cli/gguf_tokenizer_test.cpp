// A GGUF and a tokenizer.json of the same vocabulary encode identically: g4 synth writes a
// tokenizer.json, g4 quantize carries it into GGUF tokenizer.ggml.* metadata, and g4 tokenize
// encodes a mixed corpus through both.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace g4 {
namespace {

std::string g4(const std::string& args, int* rc = nullptr) {
  std::string out;
  const int code = test::run_command(test::g4_binary().string() + " " + args, &out);
  if (rc) *rc = code;
  else EXPECT_EQ(code, 0) << args << "\n" << out;
  return out;
}

TEST(GgufTokenizer, EncodesLikeTheTokenizerJsonItCameFrom) {
  test::TempDir dir;
  const std::string model = (dir / "m").string(), gguf = (dir / "m.gguf").string();
  g4("synth --preset tiny-e --vocab 4096 --out " + model);
  g4("quantize " + model + " " + gguf + " --type q8_0");
  // Prose, code, whitespace runs, CJK and emoji (byte fallback), control-token spellings.
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "def f(x):\n    return x  *  2\n\n\n",
      "   leading and trailing spaces   ",
      "日本語のテキスト and emoji 🙂👍🏽",
      "<start_of_turn>user\nhi<end_of_turn>\n<bos> not a bos",
      "tabs\t\tand\r\nCRLF"};
  std::ofstream jl(dir / "t.jsonl");
  for (const auto& t : texts) {
    std::string esc;
    for (char c : t) {
      if (c == '"' || c == '\\') esc += '\\';
      if (c == '\n') { esc += "\\n"; continue; }
      if (c == '\r') { esc += "\\r"; continue; }
      if (c == '\t') { esc += "\\t"; continue; }
      esc += c;
    }
    jl << "{\"text\": \"" << esc << "\"}\n";
  }
  jl.close();
  const std::string from_json = g4("tokenize --model " + model + " --jsonl " + (dir / "t.jsonl").string());
  const std::string from_gguf = g4("tokenize --tokenizer " + gguf + " --jsonl " + (dir / "t.jsonl").string());
  EXPECT_FALSE(from_json.empty());
  EXPECT_EQ(from_json, from_gguf);
  // And the GGUF runs end to end with its own tokenizer.
  const std::string gen = g4("generate --model " + gguf + " --prompt hello -n 4 2>&1");
  EXPECT_NE(gen.find("generated 4 tokens"), std::string::npos) << gen;
}

}  // namespace
}  // namespace g4
