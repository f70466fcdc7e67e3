#include "gpu/vulkan/vk_command.h"

#include <cstdint>

#include "gpu/vulkan/vk_result.h"

namespace g4::gpu {

namespace {
constexpr uint64_t kWaitNs = 120ull * 1000 * 1000 * 1000;  // lavapipe is slow; a GPU that takes this long is hung
}

CommandRecording::CommandRecording(const VulkanSession& session) : session_(session), s_(session.impl()) {
  const VulkanApi& api = *s_.api;
  auto alloc = vk_info<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  alloc.commandPool = s_.pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  vk_check(api.vkAllocateCommandBuffers(s_.device, &alloc, &cmd_), "vkAllocateCommandBuffers");
  if (session.info().timestamps) {
    auto q = vk_info<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    q.queryType = VK_QUERY_TYPE_TIMESTAMP;
    q.queryCount = 2;
    vk_check(api.vkCreateQueryPool(s_.device, &q, nullptr, &queries_), "vkCreateQueryPool");
  }
  auto f = vk_info<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  vk_check(api.vkCreateFence(s_.device, &f, nullptr, &fence_), "vkCreateFence");
  auto begin = vk_info<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_check(api.vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
  if (queries_) api.vkCmdResetQueryPool(cmd_, queries_, 0, 2);
}

CommandRecording::~CommandRecording() {
  const VulkanApi& api = *s_.api;
  if (fence_) api.vkDestroyFence(s_.device, fence_, nullptr);
  if (queries_) api.vkDestroyQueryPool(s_.device, queries_, nullptr);
  if (cmd_) api.vkFreeCommandBuffers(s_.device, s_.pool, 1, &cmd_);
}

void CommandRecording::start_timer() {
  if (queries_) s_.api->vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
}

void CommandRecording::stop_timer() {
  if (!queries_) return;
  s_.api->vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
  timed_ = true;
}

void CommandRecording::barrier(VkPipelineStageFlags from, VkAccessFlags written, VkPipelineStageFlags to,
                               VkAccessFlags read) {
  auto b = vk_info<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  b.srcAccessMask = written;
  b.dstAccessMask = read;
  s_.api->vkCmdPipelineBarrier(cmd_, from, to, 0, 1, &b, 0, nullptr, 0, nullptr);
}

void CommandRecording::submit_and_wait() {
  const VulkanApi& api = *s_.api;
  vk_check(api.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  auto submit = vk_info<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd_;
  vk_check(api.vkQueueSubmit(s_.queue, 1, &submit, fence_), "vkQueueSubmit");
  vk_check(api.vkWaitForFences(s_.device, 1, &fence_, VK_TRUE, kWaitNs), "vkWaitForFences");
}

std::optional<double> CommandRecording::timed_seconds() const {
  if (!timed_) return std::nullopt;
  uint64_t ticks[2] = {0, 0};
  vk_check(s_.api->vkGetQueryPoolResults(s_.device, queries_, 0, 2, sizeof ticks, ticks, sizeof(uint64_t),
                                         VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "vkGetQueryPoolResults");
  return double(ticks[1] - ticks[0]) * session_.info().timestamp_period_ns * 1e-9;
}

}  // namespace g4::gpu
