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
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/matmul/matmul.h"
#include "platform/bandwidth.h"
#include "platform/device.h"
#include "platform/fma_throughput.h"
#include "platform/dtype_policy.h"

namespace g4::cli {
namespace {

const char* kUsage =
    "usage: g4 device [--bandwidth] [--fma] [--threads N,M] [--checkpoint FMT] [--compute FMT] [--kv FMT]\n"
    "                 [--weights FMT] [--json]\n\n"
    "Probes this CPU (model, cores, caches, ISA features, OS state, AMX permission), runs the one-time\n"
    "self-tests of optional units (AMX, AVX512_BF16, AVX512_VNNI) and, where AMX passed, the checks of\n"
    "the AMX-BF16 and AMX-INT8 tile kernels and of the AMX-BF16 attention kernel, says how decode\n"
    "streams the weights on this CPU (row streams per thread, software prefetch, the next product read\n"
    "ahead, and why) and prints the dtype policy g4 resolves\n"
    "for f32, bf16, q8 and q4 checkpoints (or --checkpoint FMT), with the reason for each decision.\n\n"
    "  --bandwidth     also measure memory-read bandwidth (under a second per thread count; the best\n"
    "                  of one stream, eight streams and prefetching streams per thread)\n"
    "  --fma           also measure multiply-add throughput on 1 thread and on every usable core at once\n"
    "                  (under a second): whether the cores add compute or share one core's FMA units; and\n"
    "                  the peak of each dot-product instruction the CPU confirmed (VDPBF16PS, VPDPBUSD,\n"
    "                  TDPBF16PS, TDPBSUD)\n"
    "  --threads N,M   thread counts for --bandwidth (default: 1 and every usable core)\n"
    "  --checkpoint F  show the policy for this checkpoint format only (f32, f16, bf16, fp8, q8, q4)\n"
    "  --compute F, --kv F, --weights F   resolve the policy with these forced, as a load would\n"
    "  --json          one JSON object instead of text";

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--threads", "--checkpoint", "--compute", "--kv", "--weights"}, {"--json", "--bandwidth", "--fma"});
  const DeviceInfo& device = host_cpu();

  UserRequest request;
  if (auto v = a.get("--compute")) request.compute = parse_num_format(*v, "--compute");
  if (auto v = a.get("--kv")) request.kv = parse_num_format(*v, "--kv");
  if (auto v = a.get("--weights")) request.weights = parse_num_format(*v, "--weights");
  std::vector<NumFormat> checkpoints = {NumFormat::F32, NumFormat::BF16, NumFormat::Q8, NumFormat::Q4};
  if (auto v = a.get("--checkpoint")) checkpoints = {parse_num_format(*v, "--checkpoint")};

  // Resolved before anything is printed, so a bad request fails with its message alone.
  std::vector<std::pair<NumFormat, DevicePolicy>> policies;
  for (NumFormat ckpt : checkpoints) policies.emplace_back(ckpt, resolve_policy(device, ckpt, request));

  std::vector<BandwidthResult> bandwidth;
  if (a.has("--bandwidth")) {
    std::vector<int> thread_counts = {1, device.logical_cores};
    if (auto v = a.get("--threads")) thread_counts = parse_int_list(*v, "--threads");
    std::sort(thread_counts.begin(), thread_counts.end());
    thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
    for (int threads : thread_counts) bandwidth.push_back(measure_read_bandwidth({threads, 0, 3}));
  }

  std::optional<FmaScaling> fma;
  std::vector<MacPeak> dot_peaks;  // the products' dot-product instructions this CPU confirmed
  if (a.has("--fma")) {
    fma = measure_fma_scaling(device.logical_cores);
    if (device.avx512_bf16_usable()) dot_peaks.push_back(measure_mac_peak(MacUnit::Bf16Dot, device.logical_cores));
    if (device.avx512_vnni_usable()) dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Dot, device.logical_cores));
    if (device.amx_bf16_usable()) dot_peaks.push_back(measure_mac_peak(MacUnit::Bf16Tile, device.logical_cores));
    if (device.amx_int8_usable()) dot_peaks.push_back(measure_mac_peak(MacUnit::Int8Tile, device.logical_cores));
  }

  if (a.has("--json")) {
    nlohmann::json out;
    out["device"] = device_to_json(device);
    nlohmann::json by_checkpoint = nlohmann::json::object();
    for (const auto& [ckpt, policy] : policies) by_checkpoint[std::string(num_format_name(ckpt))] = policy_to_json(policy);
    out["policy_by_checkpoint"] = by_checkpoint;
    nlohmann::json bw = nlohmann::json::array();
    for (const auto& r : bandwidth)
      bw.push_back({{"threads", r.threads},
                    {"gb_per_s", r.best_gb_per_s},
                    {"buffer_bytes", r.buffer_bytes},
                    {"repetitions", r.repetitions},
                    {"seconds", r.seconds_total}});
    out["memory_read_bandwidth"] = bw;
    if (fma)
      out["fma_scaling"] = {{"threads", fma->threads}, {"one_thread_gflops", fma->one_thread_gflops},
                            {"all_threads_gflops", fma->all_threads_gflops}, {"cores_worth", fma_cores_worth(*fma)},
                            {"loop", fma->isa}, {"seconds", fma->seconds_total}};
    if (fma) {
      nlohmann::json peaks = nlohmann::json::array();
      for (const MacPeak& p : dot_peaks)
        peaks.push_back({{"instruction", mac_unit_name(p.unit)}, {"threads", p.threads}, {"gops", p.gops}});
      out["dot_product_peaks"] = peaks;
    }
    out["decode_streaming"] = ops::decode_plan_to_json(ops::plan_decode_streaming(device));
    const ops::TileKernelCheck& tiles = ops::amx_bf16_kernel_check();
    out["amx_bf16_kernel_check"] = {{"run", tiles.run}, {"passed", tiles.passed}, {"detail", tiles.detail}};
    const ops::TileKernelCheck& int8_tiles = ops::amx_int8_kernel_check();
    out["amx_int8_kernel_check"] = {{"run", int8_tiles.run}, {"passed", int8_tiles.passed}, {"detail", int8_tiles.detail}};
    const ops::TileKernelCheck& attention_tiles = ops::amx_attention_kernel_check();
    out["amx_attention_kernel_check"] = {
        {"run", attention_tiles.run}, {"passed", attention_tiles.passed}, {"detail", attention_tiles.detail}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  std::printf("%s", describe_device(device).c_str());
  const ops::TileKernelCheck& tiles = ops::amx_bf16_kernel_check();
  std::printf("  kernel check amx-bf16 tiles: %s (%s) -> %s\n", !tiles.run ? "not run" : tiles.passed ? "passed" : "failed",
              tiles.detail.c_str(), tiles.passed ? "BF16 weight products on tiles" : "not used");
  const ops::TileKernelCheck& int8_tiles = ops::amx_int8_kernel_check();
  std::printf("  kernel check amx-int8 tiles: %s (%s) -> %s\n",
              !int8_tiles.run ? "not run" : int8_tiles.passed ? "passed" : "failed", int8_tiles.detail.c_str(),
              int8_tiles.passed ? "Q8_0/Q4_0 prefill products on tiles" : "not used");
  const ops::TileKernelCheck& attention_tiles = ops::amx_attention_kernel_check();
  std::printf("  kernel check amx-bf16 attention: %s (%s) -> %s\n",
              !attention_tiles.run ? "not run" : attention_tiles.passed ? "passed" : "failed",
              attention_tiles.detail.c_str(), attention_tiles.passed ? "attention over a bf16 cache on tiles" : "not used");
  for (const auto& r : bandwidth)
    std::printf("  memory read: %.1f GB/s with %d thread%s (best of %d passes over %s, %.2f s)\n", r.best_gb_per_s,
                r.threads, r.threads == 1 ? "" : "s", r.repetitions, format_bytes(r.buffer_bytes).c_str(),
                r.seconds_total);
  if (bandwidth.empty()) std::printf("  memory read: not measured (g4 device --bandwidth)\n");
  if (fma) std::printf("  multiply-adds: %s\n", describe_fma_scaling(*fma).c_str());
  else std::printf("  multiply-adds: not measured (g4 device --fma)\n");
  for (const MacPeak& p : dot_peaks)
    std::printf("  dot products: %s peak %.0f GOP/s on %d threads (%d operations per instruction; what prefill is held "
                "against)\n",
                mac_unit_name(p.unit), p.gops, p.threads, mac_unit_operations(p.unit));
  std::printf("  decode weight streams: %s\n", ops::describe_decode_plan(ops::plan_decode_streaming(device)).c_str());
  for (const auto& [ckpt, policy] : policies) {
    std::printf("\ncheckpoint %s -> %s", std::string(num_format_name(ckpt)).c_str(), describe_policy(policy).c_str());
  }
  return 0;
}

const Registration reg{"device", "probe this machine; print ISA, self-tests, bandwidth, FMA scaling, dot-product peaks, dtype policy", kUsage,
                       run};

}  // namespace
}  // namespace g4::cli
