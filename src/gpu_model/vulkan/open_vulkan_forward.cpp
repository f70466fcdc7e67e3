#include "gpu/vulkan/vk_session.h"
#include "gpu_model/gpu_step_forward.h"
#include "gpu_model/vulkan_forward.h"

namespace g4 {
namespace {

// The session must outlive the decoder that uses it: both held here, session first.
class OwnedVulkanForward final : public StepForward {
 public:
  OwnedVulkanForward(const Model& m, uint32_t index, gpu::GpuDecoderLimits limits)
      : session_(std::make_unique<gpu::VulkanSession>(index)), forward_(m, *session_, limits) {}
  void forward(const std::vector<BatchRow>& rows, KvStore& kv, std::vector<float>& logits,
               std::vector<float>* hidden) override {
    forward_.forward(rows, kv, logits, hidden);
  }
  void attach(const KvStore& kv) override { forward_.attach(kv); }
  std::string name() const override { return forward_.name(); }
  double device_seconds() const override { return forward_.device_seconds(); }

 private:
  std::unique_ptr<gpu::VulkanSession> session_;
  GpuStepForward forward_;
};

}  // namespace

std::unique_ptr<StepForward> open_vulkan_forward(const Model& m, uint32_t index, gpu::GpuDecoderLimits limits) {
  return std::make_unique<OwnedVulkanForward>(m, index, limits);
}

}  // namespace g4
