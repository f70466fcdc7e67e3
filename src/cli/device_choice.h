// `--device cpu|vulkan[:N]|auto` for info, logits, generate, bench and serve: where the decoder
// runs, and why. `auto` (the default) takes a real GPU when one is present and never lavapipe or
// another CPU implementation of Vulkan (the CPU kernels are faster than a CPU emulating a GPU);
// when the GPU refuses the model (its arithmetic: a buffer over its range, weights over its
// memory, a dtype without a shader) `auto` runs on the CPU and says so, while an explicit
// `--device vulkan` refuses with that reason.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/args.h"
#include "engine/engine.h"
#include "gpu/gpu_device.h"
#include "model/model.h"
#include "model/step_forward.h"
#include "platform/dtype_policy.h"

namespace g4::cli {

extern const char* const kDeviceHelp;  // the --device paragraph of each command's usage

struct DeviceChoice {
  bool vulkan = false;
  bool explicit_choice = false;  // --device named it (refuse rather than fall back)
  uint32_t index = 0;
  gpu::VulkanDeviceInfo info;  // the probe's record of vulkan:index
  std::string reason;  // one line: which device and why
};

// Reads --device (default auto) and probes Vulkan. Throws g4::Error for a malformed value, or for
// vulkan[:N] where there is no such device (naming what the probe found).
DeviceChoice resolve_device(const Args& a);

struct DeviceRun {
  std::unique_ptr<StepForward> forward;  // null: the CPU
  std::string line;                      // "device vulkan:0 (NVIDIA L4): ..." or "device cpu: ..."
  std::string label;                     // "cpu" or the forward's name
  nlohmann::json policy;                 // the GPU policy with its reasons; null on the CPU
};

// Opens the chosen device for `m` with room for `slots` sequences of `max_context` positions and
// steps of `max_step` rows. `why_not` (non-empty) names what keeps this run on the CPU whatever
// the device (images, a KV dtype other than f32): refused for an explicit --device vulkan.
// --kv f16 keeps the device's cache in f16 (kv_f16). `compute` (--compute) goes to the GPU
// policy: f16 selects the f16-product shaders; what the policy refuses (bf16 without a shader,
// f16 without shaderFloat16) refuses the device with the policy's reason, as any refusal above.
DeviceRun open_device(const DeviceChoice& choice, const Model& m, uint32_t slots, uint32_t max_context,
                      uint32_t max_step, const std::string& why_not = "", bool kv_f16 = false,
                      std::optional<NumFormat> compute = std::nullopt);
bool device_kv_f16(const Args& a);                     // --kv f16
std::optional<NumFormat> device_compute(const Args& a);  // --compute, parsed; nullopt when absent
bool names_vulkan(const Args& a);                      // --device vulkan[:N] (an explicit device)

// The engine on the device --device chooses (generate, bench, serve): opened with room for
// eo.max_seqs sequences of `max_context` positions (0: eo.max_context) and steps of
// eo.max_batch_tokens rows; then eo.device is set, the cache made f32, and the CPU kernels that
// remain (a drafter model) read the weights as stored. `why_not`: as open_device. The returned
// run must outlive the engine.
DeviceRun attach_device(const Args& a, const Model& m, EngineOptions& eo, const std::string& why_not,
                        int64_t max_context = 0);

// What keeps a run on the CPU whatever --device says: --reference, --weights (re-encoded for the
// CPU kernels), and a --kv other than f32 or f16; empty when nothing does. (--compute goes to the
// GPU policy: open_device.)
std::string cpu_only_flags(const Args& a);

}  // namespace g4::cli
