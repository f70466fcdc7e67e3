#include "gpu/vulkan/vk_matmul.h"

#include <cstring>

#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_buffer.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_pipeline.h"
#include "platform/error.h"

namespace g4::gpu {

namespace {
struct Shape {
  uint32_t T, N, K, ldy, n0;  // matmul.comp's push constants, in its order (one whole W: ldy N, n0 0)
};

SpirvCode shader_for(WeightWords words, bool compute_f16) {
  switch (words) {
    case WeightWords::F16: return compute_f16 ? spirv::matmul_c16_f16() : spirv::matmul_f16();
    case WeightWords::BF16: return compute_f16 ? spirv::matmul_c16_bf16() : spirv::matmul_bf16();
    case WeightWords::F32: break;
  }
  return compute_f16 ? spirv::matmul_c16_f32() : spirv::matmul_f32();
}

void check_runnable(const VulkanDeviceInfo& d, const MatmulTile& tile, WeightWords words, bool compute_f16) {
  if (words == WeightWords::F16 && !d.storage_16bit)
    throw Error("matmul: f16 weights need storageBuffer16BitAccess, which " + d.name + " does not report");
  if (compute_f16 && !d.shader_float16)
    throw Error("matmul: f16 compute needs shaderFloat16, which " + d.name + " does not report");
  if (tile.workgroup == 0 || (tile.rows * tile.cols) % tile.workgroup != 0)
    throw Error("matmul: a tile's rows x cols must be a multiple of its workgroup size");
  if (tile.workgroup > d.max_workgroup_invocations)
    throw Error("matmul: workgroup of " + std::to_string(tile.workgroup) + " exceeds " + d.name + "'s limit of " +
                std::to_string(d.max_workgroup_invocations));
  const uint64_t bytes = matmul_shared_bytes(tile);
  if (bytes > d.max_shared_memory_bytes)
    throw Error("matmul: tile needs " + std::to_string(bytes) + " bytes of shared memory per workgroup, " + d.name +
                " allows " + std::to_string(d.max_shared_memory_bytes));
}

uint64_t weight_bytes(WeightWords words, uint64_t values) {
  // bf16 words are read as uints in pairs: round up to whole 32-bit words.
  if (words == WeightWords::F32) return values * 4;
  return (values * 2 + 3) / 4 * 4;
}

void copy(const CommandRecording& rec, const VulkanApi& api, const DeviceBuffer& from, const DeviceBuffer& to) {
  const VkBufferCopy region{0, 0, from.bytes()};
  api.vkCmdCopyBuffer(rec.cmd(), from.handle(), to.handle(), 1, &region);
}
}  // namespace

MatmulRun run_matmul(const VulkanSession& session, const MatmulTile& tile, WeightWords words, const void* w,
                     const float* x, uint32_t T, uint32_t N, uint32_t K, bool compute_f16) {
  if (T == 0 || N == 0 || K == 0) throw Error("matmul: empty shape");
  check_runnable(session.info(), tile, words, compute_f16);
  const VulkanApi& api = *session.impl().api;
  using Place = DeviceBuffer::Place;
  const uint64_t x_bytes = uint64_t(T) * K * 4, w_bytes = weight_bytes(words, uint64_t(N) * K),
                 y_bytes = uint64_t(T) * N * 4;
  DeviceBuffer x_dev(session, x_bytes, Place::Device), w_dev(session, w_bytes, Place::Device),
      y_dev(session, y_bytes, Place::Device);
  DeviceBuffer x_up(session, x_bytes, Place::HostStaging), w_up(session, w_bytes, Place::HostStaging),
      y_down(session, y_bytes, Place::HostStaging);
  std::memcpy(x_up.mapped(), x, x_bytes);
  std::memset(w_up.mapped(), 0, w_bytes);
  std::memcpy(w_up.mapped(), w, words == WeightWords::F32 ? w_bytes : uint64_t(N) * K * 2);

  ComputePipeline pipeline(session, shader_for(words, compute_f16), 3, sizeof(Shape), {tile.workgroup, tile.rows, tile.cols, tile.depth});
  pipeline.bind_buffers({x_dev.handle(), w_dev.handle(), y_dev.handle()});
  const Shape shape{T, N, K, N, 0};
  CommandRecording rec(session);
  copy(rec, api, x_up, x_dev);
  copy(rec, api, w_up, w_dev);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
  rec.start_timer();
  pipeline.record(rec.cmd(), &shape, (N + tile.cols - 1) / tile.cols, (T + tile.rows - 1) / tile.rows, 1);
  rec.stop_timer();
  rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
  copy(rec, api, y_dev, y_down);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
  rec.submit_and_wait();

  MatmulRun run;
  run.y.resize(size_t(T) * N);
  std::memcpy(run.y.data(), y_down.mapped(), y_bytes);
  run.device_seconds = rec.timed_seconds();
  return run;
}

}  // namespace g4::gpu
