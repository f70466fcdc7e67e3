// The engine's batches on a Vulkan device (model/step_forward.h): a GpuDecoder with one KV slot
// per sequence it holds, and the engine's KvCache kept as the host's exact f32 copy of every
// key and value the device wrote. The host copy is what keeps the engine's semantics without a
// second implementation of them: forks, prefix-cache restores, rollbacks and block accounting
// stay the KvCache's; a sequence the device does not hold (new, forked, restored, or given up
// for another) is loaded into a slot from the host before its first row runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/vulkan/vk_decoder.h"
#include "gpu/vulkan/vk_session.h"
#include "model/model.h"
#include "model/step_forward.h"

namespace g4 {

struct GpuForwardStats {
  uint64_t batches = 0;
  uint64_t slot_loads = 0;      // sequences loaded from the host copy into a slot
  double device_seconds = 0;    // by the device's timestamps
};

class GpuStepForward final : public StepForward {
 public:
  // `m` and `session` must outlive this. Throws g4::Error for what the GPU decoder refuses
  // (weights it cannot hold or read, tiles or buffers over the device's limits), with its reason.
  GpuStepForward(const Model& m, const gpu::VulkanSession& session, gpu::GpuDecoderLimits limits);
  void forward(const std::vector<BatchRow>& rows, KvStore& kv, std::vector<float>& logits,
               std::vector<float>* hidden) override;
  void attach(const KvStore& kv) override;
  std::string name() const override;
  double device_seconds() const override { return stats_.device_seconds; }
  const GpuForwardStats& stats() const { return stats_; }

 private:
  struct Slot {
    int seq = -1;               // the KvStore sequence the slot holds, -1 when free
    int64_t device_length = 0;  // positions [0, device_length) are the device's own writes
    uint64_t last_use = 0;
  };
  uint32_t slot_for(int seq, int64_t length, KvStore& kv, uint64_t tick);
  void load(uint32_t slot, int seq, int64_t length, KvStore& kv);

  const Model& model_;
  const gpu::VulkanSession& session_;
  std::unique_ptr<gpu::GpuDecoder> decoder_;
  std::vector<Slot> slots_;
  const KvStore* attached_ = nullptr;  // the cache whose sequence ids the slots name
  uint64_t clock_ = 0;
  GpuForwardStats stats_;
};

}  // namespace g4
