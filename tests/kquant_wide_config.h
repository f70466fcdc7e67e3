// A tiny-e shaped model config whose matrix rows are whole 256-value K-quant super-blocks (the
// 64-wide fixtures have none; PLE's 16-wide projection still is not), for tests that run Q4_K,
// Q5_K and Q6_K weights through a whole model. Header only: the model and engine test binaries
// link the model layer themselves.
#pragma once
#include <optional>

#include "model/presets.h"

namespace g4::test {

inline ModelConfig kquant_wide_tiny_e(std::optional<int> sliding_window = std::nullopt) {
  ModelConfig c = preset_config("tiny-e");
  c.hidden_size = 256;
  c.intermediate_size = 256;
  c.head_dim = 64;
  c.global_head_dim = 128;
  if (sliding_window) c.sliding_window = *sliding_window;
  c.finalize();
  return c;
}

}  // namespace g4::test
