#include "cli/gpu_report.h"

#include "gpu/gpu_policy.h"
#include "gpu/shader_tiles.h"
#include "platform/error.h"

namespace g4::cli {

namespace {
std::string_view state_name(gpu::ProbeState s) {
  switch (s) {
    case gpu::ProbeState::NotBuilt: return "not built";
    case gpu::ProbeState::NoLoader: return "no loader";
    case gpu::ProbeState::NoDevice: return "no device";
    case gpu::ProbeState::Found: break;
  }
  return "found";
}

// The plan's text, or the refusal: a device too small for every tile still gets listed.
std::string tile_text(const gpu::VulkanDeviceInfo& d) {
  try {
    return gpu::plan_matmul_tile(d).text;
  } catch (const Error& e) {
    return std::string("refused: ") + e.what();
  }
}
}  // namespace

std::string describe_vulkan(const gpu::VulkanProbe& probe, const std::vector<NumFormat>& checkpoints) {
  std::string s = "\nVulkan: " + probe.message + "\n";
  for (const gpu::VulkanDeviceInfo& d : probe.devices) {
    s += describe_vulkan_device(d);
    s += "  shader tiles: " + tile_text(d) + "\n";
    if (d.type == gpu::GpuType::Cpu) s += "  (a CPU implementation: correct, and far slower than g4's CPU kernels)\n";
    for (NumFormat ckpt : checkpoints) {
      const gpu::GpuPolicy p = gpu::resolve_gpu_policy(d, ckpt);
      s += "  checkpoint " + std::string(num_format_name(ckpt)) + " on this device:\n    " + p.compute_reason +
           "\n    " + p.weights_reason + "\n";
    }
  }
  return s;
}

nlohmann::json vulkan_to_json(const gpu::VulkanProbe& probe, const std::vector<NumFormat>& checkpoints) {
  nlohmann::json devices = nlohmann::json::array();
  for (const gpu::VulkanDeviceInfo& d : probe.devices) {
    nlohmann::json j = gpu::vulkan_device_to_json(d);
    nlohmann::json policies = nlohmann::json::object();
    for (NumFormat ckpt : checkpoints)
      policies[std::string(num_format_name(ckpt))] = gpu::gpu_policy_to_json(gpu::resolve_gpu_policy(d, ckpt));
    j["policy_by_checkpoint"] = policies;
    try {
      const gpu::ShaderTilePlan plan = gpu::plan_matmul_tile(d);
      j["shader_tiles"] = {{{"shader", plan.shader},
                            {"tile", {plan.tile.rows, plan.tile.cols, plan.tile.depth}},
                            {"workgroup", plan.tile.workgroup},
                            {"shared_bytes", plan.shared_bytes},
                            {"limit_bytes", plan.limit_bytes}}};
    } catch (const Error& e) {
      j["shader_tiles"] = {{{"shader", "matmul"}, {"refused", e.what()}}};
    }
    devices.push_back(j);
  }
  return {{"state", state_name(probe.state)}, {"message", probe.message}, {"devices", devices}};
}

}  // namespace g4::cli
