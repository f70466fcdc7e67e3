#include "gpu/vulkan/vk_pipeline.h"

#include "gpu/vulkan/vk_result.h"
#include "platform/error.h"

namespace g4::gpu {

namespace {
VkPipeline create_pipeline(const VulkanApi& api, VkDevice device, VkShaderModule module, VkPipelineLayout layout,
                           const std::vector<uint32_t>& constants) {
  std::vector<VkSpecializationMapEntry> entries;
  for (uint32_t i = 0; i < constants.size(); ++i) entries.push_back({i, uint32_t(i * sizeof(uint32_t)), sizeof(uint32_t)});
  VkSpecializationInfo spec{};
  spec.mapEntryCount = uint32_t(entries.size());
  spec.pMapEntries = entries.data();
  spec.dataSize = constants.size() * sizeof(uint32_t);
  spec.pData = constants.data();
  auto info = vk_info<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  info.layout = layout;
  VkPipeline pipeline = VK_NULL_HANDLE;
  vk_check(api.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline),
           "vkCreateComputePipelines");
  return pipeline;
}
}  // namespace

ComputePipeline::ComputePipeline(const VulkanSession& session, SpirvCode code, uint32_t buffer_count,
                                 uint32_t push_bytes, const std::vector<uint32_t>& specialization)
    : s_(session.impl()), buffer_count_(buffer_count), push_bytes_(push_bytes) {
  const VulkanApi& api = *s_.api;
  try {
    auto sm = vk_info<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    sm.codeSize = code.count * sizeof(uint32_t);
    sm.pCode = code.words;
    vk_check(api.vkCreateShaderModule(s_.device, &sm, nullptr, &module_), "vkCreateShaderModule");
    std::vector<VkDescriptorSetLayoutBinding> bindings;
    for (uint32_t i = 0; i < buffer_count; ++i)
      bindings.push_back({i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    auto sl = vk_info<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    sl.bindingCount = buffer_count;
    sl.pBindings = bindings.data();
    vk_check(api.vkCreateDescriptorSetLayout(s_.device, &sl, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    auto pl = vk_info<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &set_layout_;
    pl.pushConstantRangeCount = push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &push;
    vk_check(api.vkCreatePipelineLayout(s_.device, &pl, nullptr, &layout_), "vkCreatePipelineLayout");
    pipeline_ = create_pipeline(api, s_.device, module_, layout_, specialization);
    const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, buffer_count};
    auto dp = vk_info<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    dp.maxSets = 1;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &size;
    vk_check(api.vkCreateDescriptorPool(s_.device, &dp, nullptr, &pool_), "vkCreateDescriptorPool");
    auto ds = vk_info<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    ds.descriptorPool = pool_;
    ds.descriptorSetCount = 1;
    ds.pSetLayouts = &set_layout_;
    vk_check(api.vkAllocateDescriptorSets(s_.device, &ds, &set_), "vkAllocateDescriptorSets");
  } catch (...) {
    release();
    throw;
  }
}

ComputePipeline::~ComputePipeline() { release(); }

void ComputePipeline::release() {
  const VulkanApi& api = *s_.api;
  if (pool_) api.vkDestroyDescriptorPool(s_.device, pool_, nullptr);  // frees set_
  if (pipeline_) api.vkDestroyPipeline(s_.device, pipeline_, nullptr);
  if (layout_) api.vkDestroyPipelineLayout(s_.device, layout_, nullptr);
  if (set_layout_) api.vkDestroyDescriptorSetLayout(s_.device, set_layout_, nullptr);
  if (module_) api.vkDestroyShaderModule(s_.device, module_, nullptr);
  pool_ = VK_NULL_HANDLE, pipeline_ = VK_NULL_HANDLE, layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE, module_ = VK_NULL_HANDLE, set_ = VK_NULL_HANDLE;
}

namespace {
void write_set(const VulkanSession::Impl& s, VkDescriptorSet set, const std::vector<VkBuffer>& buffers) {
  std::vector<VkDescriptorBufferInfo> infos;
  std::vector<VkWriteDescriptorSet> writes;
  infos.reserve(buffers.size());
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    infos.push_back({buffers[i], 0, VK_WHOLE_SIZE});
    auto w = vk_info<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w.dstSet = set;
    w.dstBinding = i;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos.back();
    writes.push_back(w);
  }
  s.api->vkUpdateDescriptorSets(s.device, uint32_t(writes.size()), writes.data(), 0, nullptr);
}

void check_count(uint32_t expected, size_t got) {
  if (got != expected)
    throw Error("Vulkan: pipeline expects " + std::to_string(expected) + " buffers, got " + std::to_string(got));
}
}  // namespace

void ComputePipeline::bind_buffers(const std::vector<VkBuffer>& buffers) {
  check_count(buffer_count_, buffers.size());
  write_set(s_, set_, buffers);
}

void ComputePipeline::record(VkCommandBuffer cmd, const void* push, uint32_t gx, uint32_t gy, uint32_t gz) const {
  const VulkanApi& api = *s_.api;
  api.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  api.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set_, 0, nullptr);
  if (push_bytes_) api.vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  api.vkCmdDispatch(cmd, gx, gy, gz);
}

void ComputePipeline::record_with(VkCommandBuffer cmd, VkDescriptorSet set, const void* push, uint32_t gx,
                                  uint32_t gy, uint32_t gz) const {
  const VulkanApi& api = *s_.api;
  api.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  api.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set, 0, nullptr);
  if (push_bytes_) api.vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  api.vkCmdDispatch(cmd, gx, gy, gz);
}

DescriptorArena::DescriptorArena(const VulkanSession& session, uint32_t max_sets, uint32_t max_buffers)
    : s_(session.impl()) {
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, max_buffers};
  auto dp = vk_info<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dp.maxSets = max_sets;
  dp.poolSizeCount = 1;
  dp.pPoolSizes = &size;
  vk_check(s_.api->vkCreateDescriptorPool(s_.device, &dp, nullptr, &pool_), "vkCreateDescriptorPool");
}

DescriptorArena::~DescriptorArena() {
  if (pool_) s_.api->vkDestroyDescriptorPool(s_.device, pool_, nullptr);
}

VkDescriptorSet DescriptorArena::make(const ComputePipeline& pipeline, const std::vector<VkBuffer>& buffers) {
  check_count(pipeline.buffer_count(), buffers.size());
  const VkDescriptorSetLayout layout = pipeline.set_layout();
  auto ds = vk_info<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ds.descriptorPool = pool_;
  ds.descriptorSetCount = 1;
  ds.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  vk_check(s_.api->vkAllocateDescriptorSets(s_.device, &ds, &set), "vkAllocateDescriptorSets");
  write_set(s_, set, buffers);
  return set;
}

}  // namespace g4::gpu
