// The Gemma 3 fixture tokenizer, loaded once per test binary (the 33 MB file takes ~0.3 s).
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "text/tokenizer.h"

namespace g4::text::testing {

inline std::filesystem::path gemma3_dir() { return g4::test::fixtures_dir() / "tokenizer" / "gemma3"; }

inline const Tokenizer& gemma3() {
  static const Tokenizer tok = Tokenizer::from_dir(gemma3_dir());
  return tok;
}

inline std::vector<nlohmann::json> gemma3_cases() {
  std::vector<nlohmann::json> cases;
  std::ifstream f(g4::test::fixtures_dir() / "tokenizer" / "gemma3_cases.jsonl");
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

}  // namespace g4::text::testing
