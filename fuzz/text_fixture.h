// A tokenizer shared by the text fuzz targets: g4's synthetic Gemma 4 vocabulary, written once
// into the fuzz scratch directory at start-up and loaded like any tokenizer.json.
#pragma once
#include <memory>

#include "fuzz_util.h"
#include "text/synth_tokenizer.h"
#include "text/tokenizer.h"

namespace g4::fuzz {

inline const text::Tokenizer& synth_tokenizer() {
  static const std::unique_ptr<text::Tokenizer> tok = [] {
    const auto dir = scratch_dir() / "synth-tokenizer";
    std::filesystem::create_directories(dir);
    text::write_synth_tokenizer(dir, 2048);
    return std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(dir));
  }();
  return *tok;
}

}  // namespace g4::fuzz
