#include "gpu/gpu_device.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "platform/device.h"

namespace g4::gpu {

std::string_view gpu_type_name(GpuType t) {
  switch (t) {
    case GpuType::Integrated: return "integrated GPU";
    case GpuType::Discrete: return "discrete GPU";
    case GpuType::Virtual: return "virtual GPU";
    case GpuType::Cpu: return "CPU";
    case GpuType::Other: break;
  }
  return "other";
}

std::string_view support_name(Support s) {
  switch (s) {
    case Support::Yes: return "yes";
    case Support::Unknown: return "unknown to this loader";
    case Support::No: break;
  }
  return "no";
}

std::string VulkanDeviceInfo::api_version_text() const {
  // VK_API_VERSION_MAJOR/MINOR/PATCH without the header: 7 bits, 10 bits, 12 bits.
  return std::to_string((api_version >> 22) & 0x7f) + "." + std::to_string((api_version >> 12) & 0x3ff) + "." +
         std::to_string(api_version & 0xfff);
}

uint64_t VulkanDeviceInfo::device_local_bytes() const {
  uint64_t best = 0;
  for (const MemoryHeap& h : heaps)
    if (h.device_local) best = std::max(best, h.bytes);
  return best;
}

namespace {
const char* yes_no(bool b) { return b ? "yes" : "no"; }

std::string heaps_text(const VulkanDeviceInfo& d) {
  std::string out;
  for (const MemoryHeap& h : d.heaps) {
    if (!out.empty()) out += ", ";
    out += format_bytes(h.bytes) + (h.device_local ? " device-local" : " host");
  }
  return out.empty() ? "none reported" : out;
}
}  // namespace

std::string describe_vulkan_device(const VulkanDeviceInfo& d) {
  std::string s = "vulkan:" + std::to_string(d.index) + " " + d.name + " (" + std::string(gpu_type_name(d.type)) +
                  ")\n";
  s += "  driver: " + d.driver_name + " " + d.driver_info + ", Vulkan " + d.api_version_text() + "\n";
  s += "  memory heaps: " + heaps_text(d) + "; largest allocation " + format_bytes(d.max_allocation_bytes) + "\n";
  s += "  shared memory per workgroup: " + format_bytes(d.max_shared_memory_bytes) +
       "; storage buffer range: " + format_bytes(d.max_storage_buffer_range) +
       "; workgroup invocations: " + std::to_string(d.max_workgroup_invocations) + "\n";
  s += "  subgroup: " + std::to_string(d.subgroup_size) + " (size control " + yes_no(d.subgroup_size_control) +
       ", range " + std::to_string(d.min_subgroup_size) + "-" + std::to_string(d.max_subgroup_size) +
       ", full subgroups " + yes_no(d.compute_full_subgroups) + ")\n";
  s += std::string("  f16 arithmetic: ") + yes_no(d.shader_float16) + "; int8 arithmetic: " + yes_no(d.shader_int8) +
       "; 16-bit storage: " + yes_no(d.storage_16bit) + "; 8-bit storage: " + yes_no(d.storage_8bit) + "\n";
  s += std::string("  integer dot product: ") + yes_no(d.integer_dot) +
       (d.integer_dot ? (d.integer_dot_accelerated ? " (accelerated)" : " (not accelerated)") : "") +
       "; bf16: " + std::string(support_name(d.bf16)) + "; cooperative matrix: KHR " +
       yes_no(d.cooperative_matrix_khr) + ", NV " + yes_no(d.cooperative_matrix_nv) + "\n";
  char period[32];
  std::snprintf(period, sizeof period, "%g", double(d.timestamp_period_ns));
  s += std::string("  timestamps: ") + (d.timestamps ? "yes (" + std::string(period) + " ns per tick)" : "no") + "\n";
  for (const std::string& n : d.notes) s += "  note: " + n + "\n";
  return s;
}

nlohmann::json vulkan_device_to_json(const VulkanDeviceInfo& d) {
  nlohmann::json heaps = nlohmann::json::array();
  for (const MemoryHeap& h : d.heaps) heaps.push_back({{"bytes", h.bytes}, {"device_local", h.device_local}});
  return {{"index", d.index},
          {"name", d.name},
          {"type", gpu_type_name(d.type)},
          {"driver_name", d.driver_name},
          {"driver_info", d.driver_info},
          {"driver_version", d.driver_version},
          {"vendor_id", d.vendor_id},
          {"api_version", d.api_version_text()},
          {"memory_heaps", heaps},
          {"max_allocation_bytes", d.max_allocation_bytes},
          {"max_compute_shared_memory_bytes", d.max_shared_memory_bytes},
          {"max_storage_buffer_range", d.max_storage_buffer_range},
          {"max_workgroup_invocations", d.max_workgroup_invocations},
          {"subgroup_size", d.subgroup_size},
          {"subgroup_size_range", {d.min_subgroup_size, d.max_subgroup_size}},
          {"subgroup_size_control", d.subgroup_size_control},
          {"compute_full_subgroups", d.compute_full_subgroups},
          {"shader_float16", d.shader_float16},
          {"shader_int8", d.shader_int8},
          {"storage_buffer_16bit", d.storage_16bit},
          {"storage_buffer_8bit", d.storage_8bit},
          {"integer_dot_product", d.integer_dot},
          {"integer_dot_product_accelerated", d.integer_dot_accelerated},
          {"bf16", support_name(d.bf16)},
          {"cooperative_matrix_khr", d.cooperative_matrix_khr},
          {"cooperative_matrix_nv", d.cooperative_matrix_nv},
          {"timestamps", d.timestamps},
          {"timestamp_period_ns", d.timestamp_period_ns},
          {"notes", d.notes}};
}

}  // namespace g4::gpu
