#include "cli/device_choice.h"

#include "gpu/gpu_policy.h"
#include "gpu_model/vulkan_forward.h"
#include "platform/error.h"

namespace g4::cli {

const char* const kDeviceHelp =
    "  --device D      cpu | vulkan[:N] | auto (default): where the decoder runs. auto takes a real GPU\n"
    "                  when one is present (never lavapipe, a CPU implementation of Vulkan) and the CPU\n"
    "                  otherwise, or when the GPU refuses the model (the reason is printed); vulkan[:N]\n"
    "                  runs on device N of `g4 device` (default 0) or refuses with the reason. On a\n"
    "                  device the KV cache is f32 (--kv f16: f16) and images are refused; the device\n"
    "                  computes in f32, or with --compute f16 (where it reports shaderFloat16) its\n"
    "                  weight products multiply in f16 and sum in f32 (--compute bf16: no shader)\n";

namespace {

// Discrete before integrated before virtual; CPU implementations never.
int preference(gpu::GpuType t) {
  switch (t) {
    case gpu::GpuType::Discrete: return 3;
    case gpu::GpuType::Integrated: return 2;
    case gpu::GpuType::Virtual: return 1;
    default: return 0;
  }
}

std::string device_words(const gpu::VulkanDeviceInfo& d) {
  return "vulkan:" + std::to_string(d.index) + " (" + d.name + ", " + std::string(gpu::gpu_type_name(d.type)) + ")";
}

}  // namespace

DeviceChoice resolve_device(const Args& a) {
  const std::string v = a.get_or("--device", "auto");
  DeviceChoice c;
  if (v == "cpu") {
    c.explicit_choice = true;
    c.reason = "cpu: --device cpu";
    return c;
  }
  const gpu::VulkanProbe probe = gpu::probe_vulkan();
  if (v == "auto") {
    const gpu::VulkanDeviceInfo* best = nullptr;
    for (const auto& d : probe.devices)
      if (preference(d.type) > 0 && (!best || preference(d.type) > preference(best->type))) best = &d;
    if (best) {
      c.vulkan = true, c.index = best->index, c.info = *best;
      c.reason = device_words(*best) + ": --device auto takes a real GPU";
    } else if (probe.state != gpu::ProbeState::Found) {
      c.reason = "cpu: --device auto found no Vulkan device (" + probe.message + ")";
    } else {
      c.reason = "cpu: --device auto found only " + device_words(probe.devices.front()) +
                 ", a CPU implementation of Vulkan; --device vulkan:" + std::to_string(probe.devices.front().index) +
                 " runs on it anyway";
    }
    return c;
  }
  if (v.rfind("vulkan", 0) != 0 || (v.size() > 6 && v[6] != ':'))
    throw Error("--device: '" + v + "' is not cpu, vulkan, vulkan:N or auto");
  c.explicit_choice = true, c.vulkan = true;
  if (v.size() > 7) {
    size_t used = 0;
    unsigned long n = 0;
    try {
      n = std::stoul(v.substr(7), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() - 7) throw Error("--device: '" + v.substr(7) + "' is not a device number");
    c.index = uint32_t(n);
  }
  if (probe.state != gpu::ProbeState::Found) throw Error("--device " + v + ": no Vulkan device (" + probe.message + ")");
  if (c.index >= probe.devices.size())
    throw Error("--device " + v + ": there are " + std::to_string(probe.devices.size()) +
                " Vulkan devices (vulkan:0.." + std::to_string(probe.devices.size() - 1) + "; see g4 device)");
  c.info = probe.devices[c.index];
  c.reason = device_words(c.info) + ": --device " + v;
  return c;
}

DeviceRun open_device(const DeviceChoice& choice, const Model& m, uint32_t slots, uint32_t max_context,
                      uint32_t max_step, const std::string& why_not, bool kv_f16, std::optional<NumFormat> compute) {
  DeviceRun r;
  r.label = "cpu";
  if (!choice.vulkan) {
    r.line = "device " + choice.reason;
    return r;
  }
  std::string refused = why_not;
  gpu::GpuPolicy p;
  if (refused.empty()) {
    try {
      // The policy first: a --compute it refuses (bf16 without a shader, f16 without shaderFloat16)
      // refuses the device with the policy's reason before any weight is uploaded.
      p = gpu::resolve_gpu_policy(choice.info, checkpoint_format(m.weights.dtype), compute);
      gpu::GpuDecoderLimits limits{max_context, max_step, 0, slots, kv_f16};
      limits.compute_f16 = p.compute == NumFormat::F16;
      r.forward = open_vulkan_forward(m, choice.index, limits);
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  if (!refused.empty()) {
    if (choice.explicit_choice) throw Error("--device vulkan:" + std::to_string(choice.index) + ": " + refused);
    r.line = "device cpu: " + choice.reason + ", but it refused this model: " + refused;
    return r;
  }
  r.label = r.forward->name();
  r.policy = gpu::gpu_policy_to_json(p);
  r.line = "device " + choice.reason + "; " + p.compute_reason + "; " + p.weights_reason + "; KV cache in device memory (" +
           (kv_f16 ? "f16, --kv f16" : "f32") + ") with an exact f32 host copy";
  return r;
}

std::string cpu_only_flags(const Args& a) {
  if (a.has("--reference")) return "--reference runs the CPU's f32 loops";
  if (a.has("--weights")) return "--weights re-encodes the matrices for the CPU kernels";
  const std::string kv = a.get_or("--kv", "f32");
  if (kv != "f32" && kv != "f16") return "--kv " + kv + ": a device keeps its cache in f32 or f16";
  return "";
}

bool device_kv_f16(const Args& a) { return a.get_or("--kv", "f32") == "f16"; }

std::optional<NumFormat> device_compute(const Args& a) {
  if (auto v = a.get("--compute")) return parse_num_format(*v, "--compute");
  return std::nullopt;
}

bool names_vulkan(const Args& a) { return a.get_or("--device", "auto").rfind("vulkan", 0) == 0; }

DeviceRun attach_device(const Args& a, const Model& m, EngineOptions& eo, const std::string& why_not,
                        int64_t max_context) {
  const DeviceChoice choice = resolve_device(a);
  const std::string flags = cpu_only_flags(a);
  const int64_t ctx = max_context > 0 ? max_context : eo.max_context;
  DeviceRun run = open_device(choice, m, uint32_t(eo.max_seqs), uint32_t(ctx), uint32_t(eo.max_batch_tokens),
                              why_not.empty() ? flags : why_not, device_kv_f16(a), device_compute(a));
  if (run.forward) {
    eo.device = run.forward.get();
    eo.kv.dtype = KvDType::F32;  // the host copy: f32 holds the device's f16 values exactly too
    eo.bf16_compute = eo.int8_activations = false;  // the CPU kernels left (a drafter) read the weights as stored
  }
  return run;
}

}  // namespace g4::cli
