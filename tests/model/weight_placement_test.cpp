// Weight placement: the decision table (a pure function), and that copying the streamed
// matrices into huge pages changes where bytes live, never what the model computes.
#include "model/weight_placement.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>

#include "model/forward_reference.h"
#include "model/requantize.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

TEST(WeightPlacement, DecisionTable) {
  // Auto: THP on and room for the copy plus max(1 GiB, 10%) reserve -> huge.
  auto r = decide_placement(WeightMemory::Auto, "madvise", 4 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "huge");
  r = decide_placement(WeightMemory::Auto, "always", 4 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "huge");
  // Auto without THP: mapped, and the reason names the mode.
  r = decide_placement(WeightMemory::Auto, "never", 4 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "mapped");
  EXPECT_NE(r.reason.find("'never'"), std::string::npos) << r.reason;
  r = decide_placement(WeightMemory::Auto, "unavailable", 4 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "mapped");
  // Auto, a 31B-sized checkpoint on a 24 GiB machine: mapped, with the arithmetic.
  r = decide_placement(WeightMemory::Auto, "madvise", 58 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "mapped");
  EXPECT_NE(r.reason.find("59392 MiB"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("MemAvailable is 20480 MiB"), std::string::npos) << r.reason;
  // The reserve counts: 19.5 GiB + 2.4 GiB reserve does not fit 21 GiB available.
  r = decide_placement(WeightMemory::Auto, "madvise", 19 * GiB + GiB / 2, 21 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "mapped");
  // Forced.
  r = decide_placement(WeightMemory::Mapped, "always", 1, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "mapped");
  r = decide_placement(WeightMemory::Huge, "never", 4 * GiB, 20 * GiB, 24 * GiB);
  EXPECT_EQ(r.placement, "huge");
  EXPECT_NE(r.reason.find("4 KiB pages"), std::string::npos) << r.reason;
  try {
    decide_placement(WeightMemory::Huge, "madvise", 58 * GiB, 20 * GiB, 24 * GiB);
    FAIL() << "a forced copy larger than the machine must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("59392 MiB"), std::string::npos) << e.what();
  }
  EXPECT_THROW(weight_memory_from_flag("hugepages"), Error);
  EXPECT_EQ(weight_memory_from_flag("mapped"), WeightMemory::Mapped);
}

// Same logits bit for bit (the bytes are the same, only their address changes), every streamed
// matrix now outside the checkpoint's mapping, the tied head still shared with the embedding.
TEST(WeightPlacement, HugeCopyKeepsLogitsExact) {
  for (const char* v : {"tiny-e", "tiny-moe"}) {
    const auto dir = test::fixtures_dir() / "gemma4-tiny" / v / "hf";
    auto m = load_model(dir);
    const std::vector<int> tokens = {2, 17, 300, 41, 9, 77};
    const auto before = forward_reference(*m, tokens);
    const std::byte* q_before = m->weights.layers[0].q_proj->data;
    const bool tied = m->weights.lm_head == m->weights.embed_tokens;
    ThreadPool pool(2);
    const PlacementReport r = place_weights(*m, WeightMemory::Huge, &pool);
    EXPECT_EQ(r.placement, "huge") << r.reason;
    EXPECT_GT(r.tensors, 0);
    EXPECT_GT(r.bytes, 0u);
    EXPECT_LE(r.huge_bytes, (r.bytes + HugePageBuffer::kHugePage - 1) / HugePageBuffer::kHugePage * HugePageBuffer::kHugePage);
    EXPECT_NE(m->weights.layers[0].q_proj->data, q_before);
    ASSERT_EQ(m->owned_data.size(), 1u);
    const HugePageBuffer& arena = m->owned_data[0];
    for (const TensorView** s : streamed_matrices(m->weights)) {
      EXPECT_GE((*s)->data, arena.data()) << (*s)->name;
      EXPECT_LE((*s)->data + (*s)->nbytes, arena.data() + arena.size()) << (*s)->name;
    }
    EXPECT_EQ(tied, m->weights.lm_head == m->weights.embed_tokens);
    const auto after = forward_reference(*m, tokens);
    ASSERT_EQ(before.size(), after.size());
    EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float))) << v;
  }
}

// After --weights q8 the re-encoded matrices are already in owned huge-page memory: placement
// copies only what is left (matrices whose rows are not whole 32-value blocks keep their dtype).
TEST(WeightPlacement, SkipsRequantizedMatrices) {
  auto m = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf");
  const std::vector<int> tokens = {2, 5, 6, 7};
  requantize_weights(*m, DType::Q8_0, nullptr);
  const auto before = forward_reference(*m, tokens);
  int left = 0;
  std::vector<const std::byte*> q8_data;
  for (const TensorView** s : streamed_matrices(m->weights)) {
    if ((*s)->dtype == DType::Q8_0) q8_data.push_back((*s)->data);
    else ++left;
  }
  ASSERT_FALSE(q8_data.empty());
  const PlacementReport r = place_weights(*m, WeightMemory::Huge, nullptr);
  EXPECT_EQ(r.tensors, left);
  std::vector<const std::byte*> q8_after;
  for (const TensorView** s : streamed_matrices(m->weights))
    if ((*s)->dtype == DType::Q8_0) q8_after.push_back((*s)->data);
  EXPECT_EQ(q8_data, q8_after);  // not copied again
  const auto after = forward_reference(*m, tokens);
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
}

TEST(HugePageBuffer, AlignedZeroedAndHonestAboutBacking) {
  const std::string mode = transparent_hugepage_mode();
  EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never" || mode == "unavailable") << mode;
  HugePageBuffer b(5 * HugePageBuffer::kHugePage + 123);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HugePageBuffer::kHugePage, 0u);
  for (uint64_t i = 0; i < b.size(); i += 4096) ASSERT_EQ(b.data()[i], std::byte{0});
  std::memset(b.data(), 1, b.size());
  EXPECT_LE(b.huge_bytes(), 6 * HugePageBuffer::kHugePage);
  HugePageBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.data()[b.size() + 7], std::byte{1});
}

}  // namespace
}  // namespace g4
