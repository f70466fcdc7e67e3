// What the GPU decoder tests share: the tiny fixtures' token sequences (expected.json) and the
// comparisons against forward_reference (largest |logit|, argmax of a row).
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace g4::gpu::vk_test {

// The f32 bound against forward_reference: max |d| <= kRelBound * max |reference logit| (the
// shaders sum in other orders than ref::dot, and exp/division are not the C library's).
constexpr float kRelBound = 1e-4f;

struct Sequence {
  std::string name;
  std::vector<int> tokens;
  size_t row_offset = 0;
};

inline std::vector<Sequence> sequences(const std::filesystem::path& dir) {
  const auto j = nlohmann::json::parse(g4::test::read_file(dir / "expected.json"));
  std::vector<Sequence> out;
  for (const auto& s : j["sequences"])
    out.push_back({s["name"], s["tokens"].get<std::vector<int>>(), s["row_offset"].get<size_t>()});
  return out;
}

inline float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

inline size_t argmax_row(const float* row, size_t V) { return size_t(std::max_element(row, row + V) - row); }

}  // namespace g4::gpu::vk_test
