// `--weights q8|q4`: the requantized model's logits stay within a stated distance of the f32
// fixture logits, and the SIMD path on it agrees with the reference loops on it.
#include "model/requantize.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "model/forward_reference.h"
#include "model/presets.h"
#include "model/synth.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(Requantize, LogitErrorIsBoundedPerFormat) {
  for (const char* v : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    const auto dir = test::fixtures_dir() / "gemma4-tiny" / v;
    auto exp = nlohmann::json::parse(test::read_file(dir / "expected.json"));
    const auto tokens = exp["sequences"][1]["tokens"].get<std::vector<int>>();  // 40 tokens
    const size_t off = exp["sequences"][1]["row_offset"].get<size_t>() * 512;
    const auto want = test::read_f32(dir / "expected_logits.f32");
    // Bounds from measurement (printed below). Random-weight tiny models are a worst case: the
    // fixtures' README measures 0.3-0.45 from bf16 rounding alone, and up to 7.2 on tiny-moe
    // where rounding flips expert choices. The mean is the sharper check: a broken quantizer
    // (e.g. a scale misread) lands at a mean of 2+ for both formats.
    const bool moe = std::string(v) == "tiny-moe";
    for (auto [fmt, bound, mean_bound] : {std::tuple<DType, float, double>{DType::Q8_0, moe ? 8.0f : 2.5f, 0.15},
                                          {DType::Q4_0, 14.0f, 1.6}}) {
      auto m = load_model(dir / "hf");
      const uint64_t before = m->weights.bound_bytes;
      const RequantizeReport rq = requantize_weights(*m, fmt, nullptr);
      EXPECT_GT(rq.tensors, 0);
      EXPECT_LT(m->weights.bound_bytes, before);
      EXPECT_EQ(m->weights.layers[0].q_proj->dtype, fmt);
      const auto got = forward_reference(*m, tokens);
      float worst = 0;
      double mean = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - want[off + i]));
        mean += std::fabs(got[i] - want[off + i]);
      }
      mean /= double(got.size());
      std::printf("[ requant ] %s %s: max |delta logit| %.3f, mean %.4f vs f32 fixture\n", v,
                  std::string(dtype_name(fmt)).c_str(), worst, mean);
      EXPECT_GT(worst, 0.0f);
      EXPECT_LT(worst, bound) << v << " " << dtype_name(fmt);
      EXPECT_LT(mean, mean_bound) << v << " " << dtype_name(fmt);
    }
  }
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// Resident bytes of this process's mappings of `file` (/proc/self/smaps: the Rss of every VMA
// whose path is the file).
uint64_t resident_bytes_of(const std::filesystem::path& file) {
  std::ifstream f("/proc/self/smaps");
  const std::string want = std::filesystem::canonical(file).string();
  std::string line;
  bool inside = false;
  uint64_t total = 0;
  while (std::getline(f, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      inside = line.size() >= want.size() && line.compare(line.size() - want.size(), want.size(), want) == 0;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) total += std::stoull(line.substr(4)) * 1024;
  }
  return total;
}

// Re-encoding reads the checkpoint's matrices through the mapping once and releases those pages
// as it goes: afterwards the process keeps the re-encoded copy, not the checkpoint's pages too
// (the page cache still has them; a later read would fault them back in).
TEST(Requantize, ReleasesTheCheckpointPagesItRead) {
  test::TempDir dir;
  ModelConfig c = preset_config("tiny-e");  // wider, so that matrices span many whole pages
  c.hidden_size = 512;
  c.intermediate_size = 1024;
  c.head_dim = 64;
  c.global_head_dim = 128;
  c.finalize();
  SynthOptions o;
  o.dtype = DType::BF16;
  write_synth_checkpoint(c, o, dir / "m");
  auto m = load_model(dir / "m");
  const std::filesystem::path file = m->files().at(0);
  const uint64_t before = resident_bytes_of(file);
  const TensorView gate = *m->weights.layers[0].gate_proj;  // its mapped bytes, kept to read again below
  const RequantizeReport r = requantize_weights(*m, DType::Q8_0, nullptr);
  ASSERT_GT(r.bytes_before, uint64_t(8) << 20) << "too small a model to see pages";
  const uint64_t after = resident_bytes_of(file);
  std::printf("[ rss     ] checkpoint mapping resident: %llu KiB before, %llu KiB after re-encoding %llu KiB\n",
              (unsigned long long)(before >> 10), (unsigned long long)(after >> 10),
              (unsigned long long)(r.bytes_before >> 10));
  EXPECT_LT(after, before + r.bytes_before / 10);
  // The measurement sees pages, and the released ones still read: one matrix read again through
  // the mapping comes back resident, with the values the file holds.
  uint64_t sum = 0;
  for (uint64_t i = 0; i < gate.nbytes; i += 64) sum += uint64_t(gate.data[i]);
  EXPECT_GT(resident_bytes_of(file), after + gate.nbytes / 2) << sum;
  EXPECT_GT(sum, 0u);
}

}  // namespace
}  // namespace g4
