// `g4 logits --threads N`: the engine's SIMD kernels through the KV cache, written as raw f32.
// Checked against llama.cpp's logits for the shared fixture (an independent implementation),
// not against g4's own reference loops; and the flag combinations it cannot honour are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/gpu_device.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(LogitsCommand, SimdPathMatchesLlamaCppOnTheFixture) {
  const auto dir = test::fixtures_dir() / "gemma4-tiny" / "tiny-e";
  const auto j = nlohmann::json::parse(test::read_file(dir / "expected.json"));
  const auto& seq = j["sequences"][1];
  const auto tokens = seq["tokens"].get<std::vector<int>>();
  const int64_t V = j["vocab_size"].get<int64_t>(), offset = seq["row_offset"].get<int64_t>();
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  test::TempDir tmp;
  const auto out_file = tmp.path() / "l.f32";
  std::string out;
  ASSERT_EQ(0, test::g4_command("logits --model " + (dir / "hf").string() + " --tokens " + list +
                                    " --mode chunked --chunk 5 --threads 2 --compute f32 --kv f32 --out " +
                                    out_file.string(),
                                &out))
      << out;
  EXPECT_NE(out.find("SIMD kernels through the KV cache"), std::string::npos) << out;
  const auto got = test::read_f32(out_file);
  const auto want = test::read_f32(dir / "expected_logits.f32");
  ASSERT_EQ(got.size(), tokens.size() * size_t(V));
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[size_t(offset * V) + i]));
  EXPECT_LE(worst, 1e-3f);  // the fixture's bound for f32 compute and f32 KV
}

TEST(LogitsCommand, RefusesFlagsItCannotHonour) {
  const std::string model = (test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf").string();
  std::string out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --threads 2", &out));
  EXPECT_NE(out.find("--threads: the SIMD path runs through the KV cache"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --mode chunked --weights q4", &out));
  EXPECT_NE(out.find("--weights needs --threads"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --kv int8", &out));
  EXPECT_NE(out.find("--kv: --mode full runs without a KV cache"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --mode incremental --chunk 4", &out));
  EXPECT_NE(out.find("--chunk applies to --mode chunked only"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --mode chunked --threads 0", &out));
  EXPECT_NE(out.find("--threads must be >= 1"), std::string::npos) << out;
}

// `g4 logits --model <dir>/hf --tokens <tokens> --device vulkan <flags>`: the logits it wrote
// [T, V] (empty when it failed, with a test failure); `out` holds what it printed.
std::vector<float> device_logits(const std::filesystem::path& dir, const std::vector<int>& tokens,
                                 const std::string& flags, const std::filesystem::path& out_file, std::string& out) {
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  const int rc = test::g4_command("logits --model " + (dir / "hf").string() + " --tokens " + list + " --device vulkan " +
                                      flags + " --out " + out_file.string(),
                                  &out);
  EXPECT_EQ(0, rc) << out;
  return rc == 0 ? test::read_f32(out_file) : std::vector<float>{};
}

// `g4 logits --device vulkan` (lavapipe in CI) on every shared fixture and every sequence, one
// step per sequence, against llama.cpp's logits: the fixtures' f32 bound.
TEST(LogitsCommand, VulkanDeviceMatchesEveryFixture) {
  const gpu::VulkanProbe probe = gpu::probe_vulkan();
  if (probe.state != gpu::ProbeState::Found) GTEST_SKIP() << "no Vulkan device (" << probe.message << ")";
  test::TempDir tmp;
  for (const char* name : {"tiny-31b", "tiny-e", "tiny-moe"}) {
    const auto dir = test::fixtures_dir() / "gemma4-tiny" / name;
    const auto j = nlohmann::json::parse(test::read_file(dir / "expected.json"));
    const auto want = test::read_f32(dir / "expected_logits.f32");
    const int64_t V = j["vocab_size"].get<int64_t>();
    for (const auto& seq : j["sequences"]) {
      const auto tokens = seq["tokens"].get<std::vector<int>>();
      std::string out;
      const auto got = device_logits(dir, tokens, "", tmp.path() / "l.f32", out);
      EXPECT_NE(out.find("on the Vulkan device"), std::string::npos) << out;
      ASSERT_EQ(got.size(), tokens.size() * size_t(V));
      const size_t offset = seq["row_offset"].get<size_t>() * size_t(V);
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[offset + i]));
      EXPECT_LE(worst, 1e-3f) << name << " " << seq["name"];
    }
  }
  std::string out;
  const std::string model = (test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf").string();
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --mode chunked --threads 2 --device vulkan", &out));
  EXPECT_NE(out.find("--threads picks the CPU's SIMD kernels"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --device vulkan:99", &out));
  EXPECT_NE(out.find("Vulkan devices (vulkan:0.."), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + model + " --tokens 1,2 --device gpu", &out));
  EXPECT_NE(out.find("is not cpu, vulkan, vulkan:N or auto"), std::string::npos) << out;
}

// --compute f16 on the device: every sequence of every fixture within f16 compute's bound
// (docs/numerics.md; the decoder test shows it is further than f32's), greedy tokens equal where
// the fixture's top-1/top-2 margin exceeds twice the bound, and the startup line gives the
// policy's reason. The policy's refusals reach the command with their reasons.
TEST(LogitsCommand, VulkanF16ComputeStaysWithinItsBound) {
  const gpu::VulkanProbe probe = gpu::probe_vulkan();
  if (probe.state != gpu::ProbeState::Found) GTEST_SKIP() << "no Vulkan device (" << probe.message << ")";
  const gpu::VulkanDeviceInfo& d = probe.devices.front();
  const std::string tiny_e = (test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf").string();
  std::string out;
  if (!d.shader_float16 || !d.storage_16bit) {
    EXPECT_NE(0, test::g4_command("logits --model " + tiny_e + " --tokens 1,2 --device vulkan --compute f16", &out));
    EXPECT_NE(out.find("--compute f16 refused"), std::string::npos) << out;
    GTEST_SKIP() << d.name << " lacks shaderFloat16 or 16-bit storage: the refusal checked, nothing run";
  }
  constexpr float kF16Bound = 0.2f;  // docs/numerics.md: f16 products summed in f32
  test::TempDir tmp;
  for (const char* name : {"tiny-31b", "tiny-e", "tiny-moe"}) {
    const auto dir = test::fixtures_dir() / "gemma4-tiny" / name;
    const auto j = nlohmann::json::parse(test::read_file(dir / "expected.json"));
    const auto want = test::read_f32(dir / "expected_logits.f32");
    const size_t V = j["vocab_size"].get<size_t>();
    float worst = 0;
    for (const auto& seq : j["sequences"]) {
      const auto tokens = seq["tokens"].get<std::vector<int>>();
      const auto got = device_logits(dir, tokens, "--compute f16", tmp.path() / "l.f32", out);
      EXPECT_NE(out.find("compute f16: requested"), std::string::npos) << out;
      ASSERT_EQ(got.size(), tokens.size() * V);
      for (size_t t = 0; t < tokens.size(); ++t) {
        const float* fix = &want[(seq["row_offset"].get<size_t>() + t) * V];
        const float* row = &got[t * V];
        worst = std::max(worst, test::max_abs_diff(row, fix, V));
        std::vector<float> sorted(fix, fix + V);
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        if (sorted[0] - sorted[1] > 2 * kF16Bound) {
          EXPECT_EQ(std::max_element(row, row + V) - row, std::max_element(fix, fix + V) - fix)
              << name << " " << seq["name"] << " position " << t;
        }
      }
    }
    EXPECT_LE(worst, kF16Bound) << name;
    std::printf("[ cli ] %s through g4 logits --device vulkan --compute f16: max |d| vs fixture %.3g\n", name, worst);
  }
  // bf16 has no shader: refused with the policy's reason; f16 is the policy's to grant, and
  // `g4 info` shows its reason.
  EXPECT_NE(0, test::g4_command("logits --model " + tiny_e + " --tokens 1,2 --device vulkan --compute bf16", &out));
  EXPECT_NE(out.find("--compute bf16 refused"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command("logits --model " + tiny_e + " --tokens 1,2 --compute f16", &out));
  EXPECT_NE(out.find("--compute needs --threads (the SIMD path) or --device vulkan"), std::string::npos) << out;
  ASSERT_EQ(0, test::g4_command("info --model " + tiny_e + " --device vulkan --compute f16", &out)) << out;
  EXPECT_NE(out.find("gpu policy compute f16: requested; native on vulkan:0"), std::string::npos) << out;
  ASSERT_EQ(0, test::g4_command("info --model " + tiny_e + " --device vulkan --compute bf16", &out)) << out;
  EXPECT_NE(out.find("gpu policy refused: --compute bf16 refused"), std::string::npos) << out;
}

}  // namespace
}  // namespace g4
