// matmul.comp on the first Vulkan device (lavapipe in CI) against the f32 reference (ops/ref).
// Skips, saying why, where no loader or device is present.
#include "gpu/vulkan/vk_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <utility>

#include "gpu/gpu_presets.h"
#include "gpu/vulkan/vk_buffer.h"
#include "ops/ref/reference_ops.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "test_util.h"
#include "vk_test_session.h"

namespace g4::gpu {
namespace {

using test::matrix_view;
using test::random_activations;

struct Case {
  uint32_t T, N, K;
};

// Decode (one token), a shape smaller than every tile with ragged edges, and one spanning several
// workgroups of the largest tile in both directions with partial tiles at every edge.
const Case kCases[] = {{1, 70, 45}, {5, 70, 45}, {67, 130, 100}};

// y from the reference on the weights as the device sees them (after rounding to f16/bf16).
std::vector<float> reference(const std::vector<float>& x, const Case& c, DType dtype, const void* w) {
  std::vector<float> y(size_t(c.T) * c.N);
  ref::matmul(x.data(), c.T, matrix_view(dtype, c.N, c.K, w), y.data());
  return y;
}

// f32 sums in another order: bounded by a few ulps of the sum of |products|.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x,
                  const std::vector<float>& w_f32, const Case& c, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (uint32_t t = 0; t < c.T; ++t)
    for (uint32_t n = 0; n < c.N; ++n) {
      double mag = 0;
      for (uint32_t k = 0; k < c.K; ++k) mag += std::fabs(double(x[t * c.K + k]) * w_f32[n * c.K + k]);
      const size_t i = size_t(t) * c.N + n;
      ASSERT_NEAR(got[i], want[i], 1e-6 * mag + 1e-6) << what << " at token " << t << " output " << n;
    }
}

template <typename Word>
std::vector<Word> to_words(const std::vector<float>& w, Word (*convert)(float)) {
  std::vector<Word> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = convert(w[i]);
  return out;
}

}  // namespace

TEST(VulkanMatmul, F32MatchesTheReferenceWithThePlannedTile) {
  OPEN_OR_SKIP(s);
  const MatmulTile tile = plan_matmul_tile(s->info()).tile;
  for (const Case& c : kCases) {
    const std::vector<float> x = random_activations(int64_t(c.T) * c.K, 1), w = random_activations(int64_t(c.N) * c.K, 2, 0.5f);
    const MatmulRun run = run_matmul(*s, tile, WeightWords::F32, w.data(), x.data(), c.T, c.N, c.K);
    expect_close(run.y, reference(x, c, DType::F32, w.data()), x, w, c, "f32");
    if (s->info().timestamps) {
      ASSERT_TRUE(run.device_seconds.has_value());
      EXPECT_GT(*run.device_seconds, 0.0);
    }
  }
}

TEST(VulkanMatmul, HalfTheSharedMemoryTakesASmallerTileWithTheSameResults) {
  OPEN_OR_SKIP(s);
  const MatmulTile full = plan_matmul_tile(s->info()).tile;
  const ShaderTilePlan half = plan_matmul_tile(presets::with_shared_memory(s->info(), s->info().max_shared_memory_bytes / 2));
  ASSERT_TRUE(half.shrunk) << half.text;
  ASSERT_NE(half.tile, full);
  const Case c = kCases[2];
  const std::vector<float> x = random_activations(int64_t(c.T) * c.K, 3), w = random_activations(int64_t(c.N) * c.K, 4, 0.5f);
  const MatmulRun a = run_matmul(*s, full, WeightWords::F32, w.data(), x.data(), c.T, c.N, c.K);
  const MatmulRun b = run_matmul(*s, half.tile, WeightWords::F32, w.data(), x.data(), c.T, c.N, c.K);
  expect_close(b.y, a.y, x, w, c, "half tile vs full tile");
  expect_close(b.y, reference(x, c, DType::F32, w.data()), x, w, c, "half tile vs reference");
}

TEST(VulkanMatmul, SixteenBitWeightsAreWidenedInTheShader) {
  OPEN_OR_SKIP(s);
  const MatmulTile tile = plan_matmul_tile(s->info()).tile;
  const Case c = kCases[2];
  const std::vector<float> x = random_activations(int64_t(c.T) * c.K, 5), w = random_activations(int64_t(c.N) * c.K, 6, 0.5f);
  const std::vector<uint16_t> bf16 = to_words<uint16_t>(w, f32_to_bf16);
  const MatmulRun b = run_matmul(*s, tile, WeightWords::BF16, bf16.data(), x.data(), c.T, c.N, c.K);
  expect_close(b.y, reference(x, c, DType::BF16, bf16.data()), x, w, c, "bf16 words");
  if (!s->info().storage_16bit) GTEST_SKIP() << s->info().name << " has no 16-bit storage: f16 words not run";
  const std::vector<uint16_t> f16 = to_words<uint16_t>(w, f32_to_f16);
  const MatmulRun h = run_matmul(*s, tile, WeightWords::F16, f16.data(), x.data(), c.T, c.N, c.K);
  expect_close(h.y, reference(x, c, DType::F16, f16.data()), x, w, c, "f16 words");
}

namespace {

// Values of magnitude lo .. hi with random signs: their f16 products are normal numbers (no
// subnormal whose flushing is the device's choice).
std::vector<float> spread(size_t n, unsigned seed, float lo, float hi) {
  std::vector<float> v(n);
  uint32_t r = seed * 2654435761u + 1;
  for (float& x : v) {
    r = r * 1664525u + 1013904223u;
    const float u = float(r >> 8) / float(1u << 24);
    x = ((r >> 3) & 1 ? -1.0f : 1.0f) * (lo + (hi - lo) * u);
  }
  return v;
}

// --compute f16's arithmetic on the host: both operands rounded to f16, their product rounded to
// f16 (the f32 product of two 11-bit significands is exact, so rounding it once is the f16
// multiply), widened and summed in f32 in k order.
std::vector<float> f16_products_f32_sums(const std::vector<float>& x, const std::vector<float>& w, const Case& c) {
  std::vector<float> y(size_t(c.T) * c.N);
  for (uint32_t t = 0; t < c.T; ++t)
    for (uint32_t n = 0; n < c.N; ++n) {
      float sum = 0;
      for (uint32_t k = 0; k < c.K; ++k)
        sum += round_to_f16(round_to_f16(x[t * c.K + k]) * round_to_f16(w[n * c.K + k]));
      y[size_t(t) * c.N + n] = sum;
    }
  return y;
}

}  // namespace

// The COMPUTE_F16 variant gives the host's f16-product, f32-sum bits exactly, with f32 and f16
// words: a variant that multiplied in f32 (or fused the product into an f32 fma) differs, and
// so does the f32 variant. Products near f16's top (150..250 squared, up to 62500 of 65504)
// summed 100 deep reach 4e6, far past f16's range: the f32 sum keeps them finite.
TEST(VulkanMatmul, F16ComputeRoundsEachProductToF16AndSumsInF32) {
  OPEN_OR_SKIP(s);
  if (!s->info().shader_float16 || !s->info().storage_16bit)
    GTEST_SKIP() << s->info().name << " lacks shaderFloat16 or 16-bit storage: no f16 compute";
  const MatmulTile tile = plan_matmul_tile(s->info()).tile;
  for (const Case& c : kCases) {
    for (const auto& [lo, hi] : {std::pair{0.25f, 2.0f}, std::pair{150.0f, 250.0f}}) {
      const std::vector<float> x = spread(size_t(c.T) * c.K, 7, lo, hi), w = spread(size_t(c.N) * c.K, 8, lo, hi);
      const std::vector<float> want = f16_products_f32_sums(x, w, c);
      const MatmulRun h = run_matmul(*s, tile, WeightWords::F32, w.data(), x.data(), c.T, c.N, c.K, true);
      const std::vector<uint16_t> f16 = to_words<uint16_t>(w, f32_to_f16);
      const MatmulRun hw = run_matmul(*s, tile, WeightWords::F16, f16.data(), x.data(), c.T, c.N, c.K, true);
      const MatmulRun f = run_matmul(*s, tile, WeightWords::F32, w.data(), x.data(), c.T, c.N, c.K);
      size_t differ_from_f32 = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(want[i])) << i;
        ASSERT_EQ(h.y[i], want[i]) << c.T << "x" << c.N << "x" << c.K << " magnitude " << lo << " output " << i;
        ASSERT_EQ(hw.y[i], want[i]) << "f16 words, output " << i;
        differ_from_f32 += f.y[i] != want[i];
      }
      EXPECT_GT(differ_from_f32, want.size() / 2) << "f32 compute gives f16 compute's bits: the test cannot fail";
    }
  }
}

TEST(VulkanMatmul, ATileOverTheDevicesSharedMemoryIsRefusedBeforeDispatch) {
  OPEN_OR_SKIP(s);
  const uint32_t depth = uint32_t(s->info().max_shared_memory_bytes / 4 / 128);  // (64 + 64) * (depth + 1) floats > limit
  const std::vector<float> x(4, 1.0f), w(4, 1.0f);
  try {
    run_matmul(*s, {64, 64, depth, 64}, WeightWords::F32, w.data(), x.data(), 1, 1, 4);
    FAIL() << "a tile over the shared-memory limit was dispatched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of shared memory per workgroup"), std::string::npos) << e.what();
  }
}

TEST(VulkanMatmul, ABufferOverMaxStorageBufferRangeIsRefusedWithBothSizes) {
  OPEN_OR_SKIP(s);
  const uint64_t range = s->info().max_storage_buffer_range;
  try {
    DeviceBuffer too_big(*s, range + 4, DeviceBuffer::Place::Device);
    FAIL() << "a buffer over maxStorageBufferRange was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(range + 4) + " > " + std::to_string(range)), std::string::npos)
        << e.what();
  }
}

}  // namespace g4::gpu
