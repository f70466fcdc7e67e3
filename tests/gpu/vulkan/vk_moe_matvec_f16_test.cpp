// moe_matvec.comp's COMPUTE_F16 variant on its own (lavapipe in CI): each routed slot's row of its
// expert, both operands rounded to f16 and multiplied in f16, summed in f32 in k order. The
// decoder-level f16 tests on tiny-moe are dominated by the dense products, so a mistake confined
// to this shader would pass them; this test dispatches it directly and compares bits.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_buffer.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_pipeline.h"
#include "gpu/vulkan/vk_session_impl.h"
#include "platform/dtype.h"
#include "vk_test_session.h"

namespace g4::gpu {
namespace {

struct MoePush {
  uint32_t slots, N, K, x_div, row0, expert_rows, e0, experts;
};

// Values of magnitude 0.25 .. 2 with random signs (normal f16 products).
std::vector<float> moe_spread(size_t n, unsigned seed) {
  std::vector<float> v(n);
  uint32_t r = seed * 2654435761u + 1;
  for (float& x : v) {
    r = r * 1664525u + 1013904223u;
    x = ((r >> 3) & 1 ? -1.0f : 1.0f) * (0.25f + 1.75f * float(r >> 8) / float(1u << 24));
  }
  return v;
}

// y [slots, N] from one dispatch of `code` over f32 weights W [E, rows, K].
std::vector<float> run_moe(const VulkanSession& s, SpirvCode code, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<uint32_t>& ids, const MoePush& p) {
  using Place = DeviceBuffer::Place;
  const VulkanApi& api = *s.impl().api;
  const uint64_t xb = x.size() * 4, wb = w.size() * 4, ib = ids.size() * 4, yb = uint64_t(p.slots) * p.N * 4;
  DeviceBuffer xd(s, xb, Place::Device), wd(s, wb, Place::Device), id(s, ib, Place::Device), yd(s, yb, Place::Device);
  DeviceBuffer xu(s, xb, Place::HostStaging), wu(s, wb, Place::HostStaging), iu(s, ib, Place::HostStaging),
      yu(s, yb, Place::HostStaging);
  std::memcpy(xu.mapped(), x.data(), xb);
  std::memcpy(wu.mapped(), w.data(), wb);
  std::memcpy(iu.mapped(), ids.data(), ib);
  ComputePipeline pipe(s, code, 4, sizeof(MoePush), {64});
  pipe.bind_buffers({xd.handle(), wd.handle(), id.handle(), yd.handle()});
  CommandRecording rec(s);
  auto copy = [&](const DeviceBuffer& from, const DeviceBuffer& to) {
    const VkBufferCopy region{0, 0, from.bytes()};
    api.vkCmdCopyBuffer(rec.cmd(), from.handle(), to.handle(), 1, &region);
  };
  copy(xu, xd);
  copy(wu, wd);
  copy(iu, id);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
  pipe.record(rec.cmd(), &p, (p.slots * p.N + 63) / 64, 1, 1);
  rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
  copy(yd, yu);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
  rec.submit_and_wait();
  std::vector<float> y(size_t(p.slots) * p.N);
  std::memcpy(y.data(), yu.mapped(), yb);
  return y;
}

TEST(VulkanMoeMatvec, F16ComputeRoundsEachProductToF16AndSumsInF32) {
  OPEN_OR_SKIP(s);
  if (!s->info().shader_float16 || !s->info().storage_16bit)
    GTEST_SKIP() << s->info().name << " lacks shaderFloat16 or 16-bit storage: no f16 compute";
  // 3 tokens, 2 experts each (x_div 2: a slot reads its token's row), 4 experts of 40 rows, the
  // product over rows [row0, row0 + N) of each, K 96.
  const MoePush p{6, 24, 96, 2, 16, 40, 0, 4};
  const std::vector<float> x = moe_spread(size_t(3) * p.K, 3), w = moe_spread(size_t(4) * p.expert_rows * p.K, 4);
  const std::vector<uint32_t> ids{2, 0, 3, 1, 1, 2};
  std::vector<float> want(size_t(p.slots) * p.N);
  for (uint32_t sl = 0; sl < p.slots; ++sl)
    for (uint32_t n = 0; n < p.N; ++n) {
      const float* row = &w[(size_t(ids[sl]) * p.expert_rows + p.row0 + n) * p.K];
      const float* xr = &x[size_t(sl / p.x_div) * p.K];
      float sum = 0;
      for (uint32_t k = 0; k < p.K; ++k) sum += round_to_f16(round_to_f16(xr[k]) * round_to_f16(row[k]));
      want[size_t(sl) * p.N + n] = sum;
    }
  const std::vector<float> got = run_moe(*s, spirv::moe_matvec_c16_f32(), x, w, ids, p);
  const std::vector<float> f32 = run_moe(*s, spirv::moe_matvec_f32(), x, w, ids, p);
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "slot " << i / p.N << " output " << i % p.N;
    differ += f32[i] != want[i];
  }
  EXPECT_GT(differ, want.size() / 2) << "the f32 variant gives the f16 variant's bits: the test cannot fail";
}

}  // namespace
}  // namespace g4::gpu
