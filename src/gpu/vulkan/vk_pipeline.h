// A compute pipeline over storage buffers: one shader, its bindings 0..n-1, a push-constant block
// and the specialization constants the tile planner chose (so a shader's tile is fixed when the
// pipeline is built, and the shared memory it declares is the planner's arithmetic).
#pragma once
#include <cstdint>
#include <vector>

#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_session_impl.h"

namespace g4::gpu {

class ComputePipeline {
 public:
  // Throws g4::Error naming the failing Vulkan call and its VkResult.
  ComputePipeline(const VulkanSession& session, SpirvCode code, uint32_t buffer_count, uint32_t push_bytes,
                  const std::vector<uint32_t>& specialization);
  ~ComputePipeline();
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;

  // Points binding i at buffers[i] (whole buffers) for the next dispatch.
  void bind_buffers(const std::vector<VkBuffer>& buffers);
  // Records bind + push constants + dispatch into cmd.
  void record(VkCommandBuffer cmd, const void* push, uint32_t gx, uint32_t gy, uint32_t gz) const;

 private:
  void release();
  const VulkanSession::Impl& s_;
  uint32_t buffer_count_ = 0;
  uint32_t push_bytes_ = 0;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

}  // namespace g4::gpu
