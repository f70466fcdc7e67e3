#include "platform/device_presets.h"

#include <utility>

namespace g4::presets {

namespace {
constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;

SelfTest passed(const char* what) { return {SelfTestOutcome::Passed, what}; }

DeviceInfo cpu(std::string name, int cores, uint64_t l1d, uint64_t l2, uint64_t l3) {
  DeviceInfo d;
  d.kind = DeviceKind::Cpu;
  d.name = std::move(name);
  d.vendor = "preset";
  d.logical_cores = cores;
  d.physical_cores = cores;
  d.caches = {l1d, l2, l3, "preset"};
  return d;
}
}  // namespace

uint64_t cuda_max_smem_per_block(int major, int minor) {
  const int cc = major * 10 + minor;
  switch (cc) {
    case 70: case 72: return 96 * kKiB;
    case 75: return 64 * kKiB;
    case 80: case 87: return 163 * kKiB;
    case 86: case 89: case 120: return 99 * kKiB;
    case 90: case 100: return 227 * kKiB;
    default: return 48 * kKiB;
  }
}

DeviceInfo cuda_device(std::string name, int major, int minor, int sm_count, uint64_t memory_bytes) {
  DeviceInfo d;
  d.kind = DeviceKind::Cuda;
  d.name = std::move(name);
  d.vendor = "NVIDIA";
  d.gpu.compute_major = major;
  d.gpu.compute_minor = minor;
  d.gpu.smem_per_block_bytes = cuda_max_smem_per_block(major, minor);
  d.gpu.sm_count = sm_count;
  d.gpu.memory_bytes = memory_bytes;
  return d;
}

DeviceInfo t4_sm75() { return cuda_device("Tesla T4", 7, 5, 40, 16 * kGiB); }
DeviceInfo l4_sm89() { return cuda_device("NVIDIA L4", 8, 9, 58, 24 * kGiB); }
DeviceInfo h100_sm90() { return cuda_device("NVIDIA H100 SXM", 9, 0, 132, 80 * kGiB); }

DeviceInfo avx2_laptop() {
  DeviceInfo d = cpu("AVX2 laptop (preset)", 8, 32 * kKiB, 1280 * kKiB, 12 * kMiB);
  d.os_avx_state = true;
  d.isa.avx2 = d.isa.fma = d.isa.f16c = d.isa.avx_vnni = true;
  d.avx512_bf16_selftest = {SelfTestOutcome::NotRun, "no AVX512_BF16"};
  return d;
}

DeviceInfo zen3() {
  DeviceInfo d = cpu("AMD Zen 3 (preset)", 2, 32 * kKiB, 512 * kKiB, 32 * kMiB);
  d.vendor = "AuthenticAMD";
  d.os_avx_state = true;
  d.isa.avx2 = d.isa.fma = d.isa.f16c = true;
  return d;
}

DeviceInfo alder_lake() {
  DeviceInfo d = cpu("Intel Alder Lake (preset)", 8, 48 * kKiB, 1280 * kKiB, 30 * kMiB);
  d.os_avx_state = true;
  d.isa.avx2 = d.isa.fma = d.isa.f16c = d.isa.avx_vnni = true;
  d.avx_vnni_selftest = passed("preset");
  return d;
}

DeviceInfo ice_lake() {
  DeviceInfo d = cpu("Intel Ice Lake (preset)", 2, 48 * kKiB, 1280 * kKiB, 48 * kMiB);
  d.os_avx_state = d.os_avx512_state = true;
  IsaFeatures& f = d.isa;
  f.avx2 = f.fma = f.f16c = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_vnni = true;
  d.avx512_vnni_selftest = passed("preset");
  return d;
}

DeviceInfo zen4() {
  DeviceInfo d = cpu("AMD Zen 4 (preset)", 2, 32 * kKiB, 1 * kMiB, 32 * kMiB);
  d.vendor = "AuthenticAMD";
  d.os_avx_state = d.os_avx512_state = true;
  IsaFeatures& f = d.isa;
  f.avx2 = f.fma = f.f16c = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_vnni = f.avx512_bf16 = true;
  d.avx512_vnni_selftest = passed("preset");
  d.avx512_bf16_selftest = passed("preset");
  return d;
}

DeviceInfo sapphire_rapids() {
  DeviceInfo d = cpu("Sapphire Rapids (preset)", 2, 48 * kKiB, 2 * kMiB, 105 * kMiB);
  d.os_avx_state = d.os_avx512_state = d.os_amx_state = d.os_amx_permitted = true;
  IsaFeatures& f = d.isa;
  f.avx2 = f.fma = f.f16c = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  f.avx512_bf16 = f.avx512_fp16 = f.avx_vnni = f.avx512_vnni = true;
  f.amx_tile = f.amx_bf16 = f.amx_int8 = true;
  d.amx_bf16_selftest = passed("preset");
  d.amx_int8_selftest = passed("preset");
  d.avx512_bf16_selftest = passed("preset");
  d.avx512_vnni_selftest = passed("preset");
  d.avx_vnni_selftest = passed("preset");
  return d;
}

DeviceInfo sapphire_rapids_amx_refused() {
  DeviceInfo d = sapphire_rapids();
  d.os_amx_permitted = false;
  d.amx_bf16_selftest = d.amx_int8_selftest = {SelfTestOutcome::NotRun, "AMX tile state not granted by the OS"};
  return d;
}

DeviceInfo sapphire_rapids_amx_selftest_failed() {
  DeviceInfo d = sapphire_rapids();
  d.amx_bf16_selftest = {SelfTestOutcome::Failed, "SIGILL: this CPU or OS refused the AMX-BF16 tile instruction"};
  d.amx_int8_selftest = d.amx_bf16_selftest;
  return d;
}

DeviceInfo baseline_x86() { return cpu("baseline x86-64 (preset)", 4, 32 * kKiB, 256 * kKiB, 8 * kMiB); }

namespace {
DeviceInfo arm_cpu(std::string name, std::string vendor, uint64_t l1d, uint64_t l2, uint64_t l3) {
  DeviceInfo d = cpu(std::move(name), 4, l1d, l2, l3);
  d.arch = CpuArch::Aarch64;
  d.vendor = std::move(vendor);
  d.isa.neon = d.isa.fp16 = d.isa.neon_dotprod = true;
  d.neon_dotprod_selftest = passed("preset");
  return d;
}
}  // namespace

DeviceInfo neoverse_n1() { return arm_cpu("Arm Neoverse N1 (preset)", "ARM", 64 * kKiB, 1 * kMiB, 32 * kMiB); }

DeviceInfo neoverse_v1() {
  DeviceInfo d = arm_cpu("Arm Neoverse V1 (preset)", "ARM", 64 * kKiB, 1 * kMiB, 32 * kMiB);
  d.isa.i8mm = d.isa.arm_bf16 = d.isa.sve = true;
  return d;
}

DeviceInfo neoverse_v2() {
  DeviceInfo d = arm_cpu("Arm Neoverse V2 (preset)", "ARM", 64 * kKiB, 2 * kMiB, 36 * kMiB);
  d.isa.i8mm = d.isa.arm_bf16 = d.isa.sve = d.isa.sve2 = true;
  return d;
}

DeviceInfo apple_m2() {
  DeviceInfo d = arm_cpu("Apple M2 (preset)", "Apple", 128 * kKiB, 4 * kMiB, 8 * kMiB);
  d.isa.i8mm = d.isa.arm_bf16 = true;
  return d;
}

DeviceInfo with_caches(DeviceInfo device, uint64_t l1d_bytes, uint64_t l2_bytes) {
  device.caches.l1d_bytes = l1d_bytes;
  device.caches.l2_bytes = l2_bytes;
  return device;
}

}  // namespace g4::presets
