// One command buffer recorded, submitted once and waited for with a fence, with two timestamp
// queries around the work it times (the engine step will record all its dispatches into one
// such buffer: one submission per step, not one per op).
#pragma once
#include <optional>

#include "gpu/vulkan/vk_session_impl.h"

namespace g4::gpu {

class CommandRecording {
 public:
  explicit CommandRecording(const VulkanSession& session);  // begins recording
  ~CommandRecording();
  CommandRecording(const CommandRecording&) = delete;
  CommandRecording& operator=(const CommandRecording&) = delete;

  VkCommandBuffer cmd() const { return cmd_; }
  void start_timer();  // timestamp 0, after all earlier commands
  void stop_timer();   // timestamp 1
  // Makes earlier transfer or shader writes visible to later shader reads and transfers.
  void barrier(VkPipelineStageFlags from, VkAccessFlags written, VkPipelineStageFlags to, VkAccessFlags read);
  // Ends, submits, waits (throws g4::Error with the VkResult: device lost, timeout).
  void submit_and_wait();
  // Device seconds between the timestamps; nullopt when the queue has no timestamps.
  std::optional<double> timed_seconds() const;

 private:
  const VulkanSession& session_;
  const VulkanSession::Impl& s_;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool timed_ = false;
};

}  // namespace g4::gpu
