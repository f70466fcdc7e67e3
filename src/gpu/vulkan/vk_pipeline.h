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
  // The same with a descriptor set of this pipeline's layout made elsewhere (DescriptorArena):
  // many dispatches of one pipeline over different buffers inside one command buffer.
  void record_with(VkCommandBuffer cmd, VkDescriptorSet set, const void* push, uint32_t gx, uint32_t gy,
                   uint32_t gz) const;
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  uint32_t buffer_count() const { return buffer_count_; }

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

// Descriptor sets for one recorded command buffer: one per dispatch, each pointing a pipeline's
// bindings at whole buffers; all freed together when the arena goes (after the submission).
class DescriptorArena {
 public:
  DescriptorArena(const VulkanSession& session, uint32_t max_sets, uint32_t max_buffers);
  ~DescriptorArena();
  DescriptorArena(const DescriptorArena&) = delete;
  DescriptorArena& operator=(const DescriptorArena&) = delete;
  // Throws g4::Error when the arena is full or the buffer count is not the pipeline's.
  VkDescriptorSet make(const ComputePipeline& pipeline, const std::vector<VkBuffer>& buffers);

 private:
  const VulkanSession::Impl& s_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

}  // namespace g4::gpu
