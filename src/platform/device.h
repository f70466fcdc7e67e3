// What the machine g4 runs on can do: the CPU probe (cpuid + OS state + caches) and room for GPU
// limits. Kernel families, dtypes and tile sizes are chosen from this record, never from a config
// file (docs/lessons.md, lesson 1), so every field says whether it was confirmed or assumed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace g4 {

enum class DeviceKind : uint8_t { Cpu, Cuda };
// The CPU's instruction set family: which half of IsaFeatures the probe fills and the report lists.
enum class CpuArch : uint8_t { X86_64, Aarch64, Other };

// The integer dot product a CPU multiplies int8 blocks with. x86, best last: AVX2's
// VPMADDUBSW + VPMADDWD (u8 x s8 pairs summed in int16, then int32), AVX-VNNI's 256-bit VEX
// VPDPBUSD, AVX512_VNNI's 512-bit VPDPBUSD; aarch64: NEON's SDOT (dotprod, s8 x s8 quads into
// int32). Each sums the same exact int32 products. Not an order: see runs_int8_tier.
enum class Int8Dot : uint8_t { None, Avx2, AvxVnni, Avx512Vnni, NeonDot };
std::string_view int8_dot_name(Int8Dot t);  // "none", "avx2", "avx-vnni", "avx512-vnni", "neon-dotprod"
// "VPMADDUBSW + VPMADDWD (AVX2)", "VPDPBUSD (AVX-VNNI, 256-bit)", "VPDPBUSD (AVX512_VNNI)",
// "SDOT (NEON dotprod)", "none"
std::string_view int8_dot_instruction(Int8Dot t);
// Accepts the names int8_dot_name gives (any case); nullopt for anything else.
std::optional<Int8Dot> int8_dot_from_name(std::string_view name);

// Instruction-set features the CPU reports AND the OS has enabled register state for.
// A feature whose cpuid bit is set but whose state the OS does not save stays false here (a note
// in DeviceInfo::probe_notes says so): executing it would fault.
struct IsaFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;  // vdpbf16ps: native bf16 dot products
  bool avx512_fp16 = false;  // native f16 arithmetic
  bool avx_vnni = false;
  bool avx512_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // aarch64, as the kernel reports them in AT_HWCAP / AT_HWCAP2 (it lists only what it enables).
  // g4 runs NEON through Highway's f32 kernels; no kernel uses the dot-product units yet.
  bool neon = false;          // asimd (Advanced SIMD)
  bool neon_dotprod = false;  // asimddp: SDOT/UDOT, int8 dot products into int32
  bool i8mm = false;          // SMMLA/UMMLA/USDOT: int8 2x8x2 matrix multiply-accumulate
  bool arm_bf16 = false;      // BFDOT/BFMMLA/BFCVT
  bool sve = false;
  bool sve2 = false;
  bool fp16 = false;          // fphp + asimdhp: f16 arithmetic (not only conversion)
};

// Per-core L1d/L2, shared L3 (the total the CPU reports). 0 = unknown.
struct CacheSizes {
  uint64_t l1d_bytes = 0;
  uint64_t l2_bytes = 0;
  uint64_t l3_bytes = 0;
  std::string source;  // where the figures came from ("sysfs", "cpuid leaf 4", ...)
};

// The one-time check that an optional unit computes what the scalar path computes on this CPU.
enum class SelfTestOutcome : uint8_t { NotRun, Passed, Failed };
struct SelfTest {
  SelfTestOutcome outcome = SelfTestOutcome::NotRun;
  std::string detail;  // why it did not run, what differed, or "16x16x32 tile product matches scalar"
  bool passed() const { return outcome == SelfTestOutcome::Passed; }
};

// GPU limits the CUDA backend will fill in; zero on a CPU.
struct GpuInfo {
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t smem_per_block_bytes = 0;  // opt-in maximum dynamic shared memory per block
  int sm_count = 0;
  uint64_t memory_bytes = 0;
  int compute_capability() const { return compute_major * 10 + compute_minor; }  // 75, 89, 90
};

struct DeviceInfo {
  DeviceKind kind = DeviceKind::Cpu;
  CpuArch arch = CpuArch::X86_64;  // what probe_cpu was built for; presets say which they model
  std::string name;    // CPU brand string or GPU product name
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", "NVIDIA"
  int logical_cores = 0;   // CPUs this process may run on
  int physical_cores = 0;  // 0 = not knowable here
  CacheSizes caches;
  IsaFeatures isa;
  bool os_avx_state = false;     // XCR0 saves YMM
  bool os_avx512_state = false;  // XCR0 saves opmask + ZMM
  bool os_amx_state = false;     // XCR0 has XTILECFG + XTILEDATA
  bool os_amx_permitted = false; // arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) granted to this process
  SelfTest amx_bf16_selftest;
  SelfTest amx_int8_selftest;
  SelfTest avx512_bf16_selftest;
  SelfTest avx512_vnni_selftest;
  SelfTest avx_vnni_selftest;
  SelfTest neon_dotprod_selftest;  // aarch64: SDOT against the scalar path
  GpuInfo gpu;
  std::vector<std::string> probe_notes;  // anything surprising the probe saw (a unit reported but unusable)

  // Optional units are usable only when cpuid, the OS and the self-test all agree (lesson: a
  // well-known engine dies with SIGILL in its AMX path on this machine class).
  bool amx_bf16_usable() const {
    return isa.amx_tile && isa.amx_bf16 && os_amx_permitted && amx_bf16_selftest.passed();
  }
  bool amx_int8_usable() const {
    return isa.amx_tile && isa.amx_int8 && os_amx_permitted && amx_int8_selftest.passed();
  }
  // AVX-512 F/BW/VL in cpuid and the OS saving the ZMM state: what the plain AVX-512 code paths need.
  bool avx512_usable() const { return isa.avx512f && isa.avx512bw && isa.avx512vl && os_avx512_state; }
  bool avx512_bf16_usable() const { return isa.avx512_bf16 && avx512_bf16_selftest.passed(); }
  // The int8 weight-product kernel (ops/matmul/gemm_q8.h) also needs AVX-512 BW and VL.
  bool avx512_vnni_usable() const {
    return isa.avx512_vnni && isa.avx512bw && isa.avx512vl && avx512_vnni_selftest.passed();
  }
  // AVX-VNNI (VEX VPDPBUSD on 256 bits, Alder Lake and later clients), confirmed by its self-test.
  bool avx_vnni_usable() const { return isa.avx_vnni && isa.avx2 && avx_vnni_selftest.passed(); }
  // The int8 kernels' AVX2 tier also converts f16 scales (F16C) and accumulates with FMA.
  bool avx2_int8_usable() const { return isa.avx2 && isa.fma && isa.f16c; }
  // aarch64 SDOT: the hwcap and g4's self-test (the int8 kernels' NEON tier).
  bool neon_dotprod_usable() const {
    return arch == CpuArch::Aarch64 && isa.neon && isa.neon_dotprod && neon_dotprod_selftest.passed();
  }
  // The best integer dot product this CPU confirmed (the int8 kernels' tier). On aarch64 SDOT
  // (SMMLA has no g4 kernel yet: the policy's reasons say so).
  Int8Dot int8_dot() const {
    if (kind != DeviceKind::Cpu) return Int8Dot::None;
    if (arch == CpuArch::Aarch64) return neon_dotprod_usable() ? Int8Dot::NeonDot : Int8Dot::None;
    if (avx512_vnni_usable() && isa.f16c && isa.fma) return Int8Dot::Avx512Vnni;
    if (avx_vnni_usable() && avx2_int8_usable()) return Int8Dot::AvxVnni;
    if (avx2_int8_usable()) return Int8Dot::Avx2;
    return Int8Dot::None;
  }
  // Whether this CPU can run the int8 kernels' `tier`. The tiers are not nested: Zen 4, Ice Lake
  // and Sapphire Rapids have AVX512_VNNI without AVX-VNNI, so "at most int8_dot()" is wrong.
  bool runs_int8_tier(Int8Dot tier) const {
    if (kind != DeviceKind::Cpu) return tier == Int8Dot::None;
    switch (tier) {
      case Int8Dot::None: return true;
      case Int8Dot::Avx2: return avx2_int8_usable();
      case Int8Dot::AvxVnni: return avx_vnni_usable() && avx2_int8_usable();
      case Int8Dot::Avx512Vnni: return avx512_vnni_usable() && isa.f16c && isa.fma;
      case Int8Dot::NeonDot: return neon_dotprod_usable();
    }
    return false;
  }
};

struct ProbeOptions {
  bool request_amx_permission = true;  // ask the kernel for AMX tile state (process-wide, harmless)
  bool run_selftests = true;           // confirm optional units against the scalar path
};

// Reads cpuid, XCR0, sysfs and /proc on this machine. Never executes an optional instruction
// outside a SIGILL guard. Safe on any x86-64 CPU; on aarch64 the features come from getauxval
// (platform/isa_arm.h); on other architectures only cores and caches.
DeviceInfo probe_cpu(const ProbeOptions& options = {});

// probe_cpu() once per process (the AMX permission request and self-tests are one-time work).
const DeviceInfo& host_cpu();

// Human-readable multi-line report for `g4 device` and `g4 info`.
std::string describe_device(const DeviceInfo& device);
nlohmann::json device_to_json(const DeviceInfo& device);

std::string_view selftest_outcome_name(SelfTestOutcome outcome);  // "not run", "passed", "failed"

// "48 KiB", "2 MiB", "1.5 GiB": sizes in reports and error messages.
std::string format_bytes(uint64_t bytes);

}  // namespace g4
