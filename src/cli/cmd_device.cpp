// g4 device: what this machine can do and what g4 will therefore do on it: the CPU probe, the
// optional-unit self-tests, the default dtype policy per checkpoint dtype, and (on request) the
// measured memory-read bandwidth that bounds decode speed.
#include <algorithm>
#include <optional>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/gpu_report.h"
#include "cli/kernel_checks.h"
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/amx/gemm_q8_tiles.h"
#include "ops/matmul/matmul.h"
#include "platform/bandwidth.h"
#include "platform/device.h"
#include "platform/fma_throughput.h"
#include "platform/dtype_policy.h"
#include "gpu/gpu_device.h"

namespace g4::cli {
namespace {

const char* kUsage =
    "usage: g4 device [--bandwidth] [--fma] [--threads N,M] [--checkpoint FMT] [--compute FMT] [--kv FMT]\n"
    "                 [--weights FMT] [--json]\n\n"
    "Probes this CPU (model, cores, caches, ISA features, OS state, AMX permission), runs the one-time\n"
    "self-tests of optional units (AMX, AVX512_BF16, AVX512_VNNI, AVX-VNNI), names the integer dot\n"
    "product the int8 kernels run on (AVX512_VNNI, AVX-VNNI or AVX2) and, where AMX passed, the checks of\n"
    "the AMX-BF16 and AMX-INT8 tile kernels and of the AMX-BF16 attention kernel, says how decode\n"
    "streams the weights on this CPU (row streams per thread, software prefetch, the next product read\n"
    "ahead, and why), whether attention over a bf16 cache runs on VDPBF16PS or on FMA (and why),\n"
    "and prints the dtype policy g4 resolves\n"
    "for f32, bf16, q8 and q4 checkpoints (or --checkpoint FMT), with the reason for each decision.\n"
    "Then lists every Vulkan device (or says why there is none: no loader, no driver, a build without\n"
    "Vulkan): driver, API version, memory heaps, shared memory, storage-buffer range, subgroup size,\n"
    "f16/int8/bf16 support, integer dot product, cooperative matrix, the GPU dtype policy per\n"
    "checkpoint format with its reasons, and the matmul shader's tile against the shared memory.\n\n"
    "  --bandwidth     also measure memory-read bandwidth (under a second per thread count; the best\n"
    "                  of one stream, eight streams and prefetching streams per thread)\n"
    "  --fma           also measure multiply-add throughput on 1 thread and on every usable core at once\n"
    "                  (under a second): whether the cores add compute or share one core's FMA units; and\n"
    "                  the peak of each dot-product instruction the CPU confirmed (VDPBF16PS, VPDPBUSD,\n"
    "                  TDPBF16PS, TDPBSUD; without AVX512_VNNI the int8 tier's own step: VPDPBUSD on\n"
    "                  AVX-VNNI or VPMADDUBSW+VPMADDWD on AVX2)\n"
    "  --threads N,M   thread counts for --bandwidth (default: 1 and every usable core)\n"
    "  --checkpoint F  show the policy for this checkpoint format only (f32, f16, bf16, fp8, q8, q4)\n"
    "  --compute F, --kv F, --weights F   resolve the policy with these forced, as a load would\n"
    "  --json          one JSON object instead of text";

struct DeviceReport {
  std::vector<std::pair<NumFormat, DevicePolicy>> policies;  // per checkpoint format
  std::vector<BandwidthResult> bandwidth;                    // per thread count (--bandwidth)
  std::optional<FmaScaling> fma;                              // --fma
  std::vector<MacPeak> dot_peaks;  // the products' dot-product instructions this CPU confirmed (--fma)
  gpu::VulkanProbe vulkan;         // every Vulkan device, or why none
  std::vector<NumFormat> checkpoints;
};

// Resolved before anything is measured or printed, so a bad request fails with its message alone.
std::vector<std::pair<NumFormat, DevicePolicy>> resolve_policies(const Args& a, const DeviceInfo& device) {
  UserRequest request;
  if (auto v = a.get("--compute")) request.compute = parse_num_format(*v, "--compute");
  if (auto v = a.get("--kv")) request.kv = parse_num_format(*v, "--kv");
  if (auto v = a.get("--weights")) request.weights = parse_num_format(*v, "--weights");
  std::vector<NumFormat> checkpoints = {NumFormat::F32, NumFormat::BF16, NumFormat::Q8, NumFormat::Q4};
  if (auto v = a.get("--checkpoint")) checkpoints = {parse_num_format(*v, "--checkpoint")};
  std::vector<std::pair<NumFormat, DevicePolicy>> policies;
  for (NumFormat ckpt : checkpoints) policies.emplace_back(ckpt, resolve_policy(device, ckpt, request));
  return policies;
}

std::vector<BandwidthResult> measure_bandwidths(const Args& a, const DeviceInfo& device) {
  std::vector<int> thread_counts = {1, device.logical_cores};
  if (auto v = a.get("--threads")) thread_counts = parse_int_list(*v, "--threads");
  std::sort(thread_counts.begin(), thread_counts.end());
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  std::vector<BandwidthResult> bandwidth;
  for (int threads : thread_counts) bandwidth.push_back(measure_read_bandwidth({threads, 0, 3}));
  return bandwidth;
}

void measure_compute(const DeviceInfo& device, DeviceReport& r) {
  const int cores = device.logical_cores;
  r.fma = measure_fma_scaling(cores);
  if (device.avx512_bf16_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Bf16Dot, cores));
  if (device.avx512_vnni_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Dot, cores));
  else if (device.avx_vnni_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Dot256, cores));
  else if (device.avx2_int8_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Madd, cores));
  if (device.neon_dotprod_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Sdot, cores));
  if (device.amx_bf16_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Bf16Tile, cores));
  if (device.amx_int8_usable()) r.dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Tile, cores));
}

nlohmann::json measurements_json(const DeviceReport& r) {
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json bw = nlohmann::json::array();
  for (const auto& b : r.bandwidth)
    bw.push_back({{"threads", b.threads},
                  {"gb_per_s", b.best_gb_per_s},
                  {"buffer_bytes", b.buffer_bytes},
                  {"repetitions", b.repetitions},
                  {"seconds", b.seconds_total}});
  out["memory_read_bandwidth"] = bw;
  if (!r.fma) return out;
  const FmaScaling& fma = *r.fma;
  out["fma_scaling"] = {{"threads", fma.threads}, {"one_thread_gflops", fma.one_thread_gflops},
                        {"all_threads_gflops", fma.all_threads_gflops}, {"cores_worth", fma_cores_worth(fma)},
                        {"loop", fma.isa}, {"seconds", fma.seconds_total}};
  nlohmann::json peaks = nlohmann::json::array();
  for (const MacPeak& p : r.dot_peaks)
    peaks.push_back({{"instruction", mac_unit_name(p.unit)}, {"threads", p.threads}, {"gops", p.gops}});
  out["dot_product_peaks"] = peaks;
  return out;
}

void print_json(const DeviceInfo& device, const DeviceReport& r) {
  nlohmann::json out = measurements_json(r);
  out["device"] = device_to_json(device);
  nlohmann::json by_checkpoint = nlohmann::json::object();
  for (const auto& [ckpt, policy] : r.policies) by_checkpoint[std::string(num_format_name(ckpt))] = policy_to_json(policy);
  out["policy_by_checkpoint"] = by_checkpoint;
  out["decode_streaming"] = ops::decode_plan_to_json(ops::plan_decode_streaming(device));
  const ops::AttentionPlan attention = ops::plan_attention(device);
  out["attention_plan"] = {{"bf16_dots", attention.bf16_dots}, {"reason", attention.reason}};
  add_kernel_checks_json(out);
  out["vulkan"] = vulkan_to_json(r.vulkan, r.checkpoints);
  std::printf("%s\n", out.dump(2).c_str());
}

void print_kernel_checks() {
  const ops::TileKernelCheck& tiles = ops::amx_bf16_kernel_check();
  std::printf("  kernel check amx-bf16 tiles: %s (%s) -> %s\n", kernel_check_status(tiles), tiles.detail.c_str(),
              tiles.passed ? "BF16 weight products on tiles" : "not used");
  const ops::TileKernelCheck& int8_tiles = ops::amx_int8_kernel_check();
  std::printf("  kernel check amx-int8 tiles: %s (%s) -> %s\n", kernel_check_status(int8_tiles), int8_tiles.detail.c_str(),
              int8_tiles.passed ? "Q8_0/Q4_0 prefill products on tiles" : "not used");
  const ops::TileKernelCheck& attention_tiles = ops::amx_attention_kernel_check();
  std::printf("  kernel check amx-bf16 attention: %s (%s) -> %s\n", kernel_check_status(attention_tiles),
              attention_tiles.detail.c_str(), attention_tiles.passed ? "attention over a bf16 cache on tiles" : "not used");
}

void print_measurements(const DeviceReport& r) {
  for (const auto& b : r.bandwidth)
    std::printf("  memory read: %.1f GB/s with %d thread%s (best of %d passes over %s, %.2f s)\n", b.best_gb_per_s,
                b.threads, b.threads == 1 ? "" : "s", b.repetitions, format_bytes(b.buffer_bytes).c_str(),
                b.seconds_total);
  if (r.bandwidth.empty()) std::printf("  memory read: not measured (g4 device --bandwidth)\n");
  if (r.fma) std::printf("  multiply-adds: %s\n", describe_fma_scaling(*r.fma).c_str());
  else std::printf("  multiply-adds: not measured (g4 device --fma)\n");
  for (const MacPeak& p : r.dot_peaks)
    std::printf("  dot products: %s peak %.0f GOP/s on %d threads (%d operations per instruction; what prefill is held "
                "against)\n",
                mac_unit_name(p.unit), p.gops, p.threads, mac_unit_operations(p.unit));
}

void print_text(const DeviceInfo& device, const DeviceReport& r) {
  std::printf("%s", describe_device(device).c_str());
  print_kernel_checks();
  print_measurements(r);
  std::printf("  decode weight streams: %s\n", ops::describe_decode_plan(ops::plan_decode_streaming(device)).c_str());
  const ops::AttentionPlan attention = ops::plan_attention(device);
  std::printf("  attention dot products without AMX tiles: %s (%s)\n",
              attention.bf16_dots ? "VDPBF16PS over a bf16 cache" : "bf16 K/V widened to f32 for FMA",
              attention.reason.c_str());
  for (const auto& [ckpt, policy] : r.policies) {
    std::printf("\ncheckpoint %s -> %s", std::string(num_format_name(ckpt)).c_str(), describe_policy(policy).c_str());
  }
  std::printf("%s", describe_vulkan(r.vulkan, r.checkpoints).c_str());
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--threads", "--checkpoint", "--compute", "--kv", "--weights"}, {"--json", "--bandwidth", "--fma"});
  const DeviceInfo& device = host_cpu();
  DeviceReport report;
  report.policies = resolve_policies(a, device);
  for (const auto& entry : report.policies) report.checkpoints.push_back(entry.first);
  report.vulkan = gpu::probe_vulkan();
  if (a.has("--bandwidth")) report.bandwidth = measure_bandwidths(a, device);
  if (a.has("--fma")) measure_compute(device, report);
  if (a.has("--json")) print_json(device, report);
  else print_text(device, report);
  return 0;
}

const Registration reg{"device", "probe this machine; print ISA, self-tests, bandwidth, FMA scaling, dot-product peaks, dtype policy, Vulkan devices", kUsage,
                       run};

}  // namespace
}  // namespace g4::cli
