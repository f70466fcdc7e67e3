#include "platform/device.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "platform/isa_arm.h"
#include "platform/isa_selftest.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace g4 {
namespace {

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

[[maybe_unused]] bool bit(uint32_t reg, int index) { return (reg >> index) & 1u; }

#if defined(__x86_64__)
// Leaves above the maximum return garbage on some CPUs: check the range first.
CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  CpuidRegs r;
  uint32_t max_leaf = __get_cpuid_max(leaf & 0x80000000u, nullptr);
  if (leaf > max_leaf) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

std::string regs_text(std::initializer_list<uint32_t> regs) {
  std::string text;
  for (uint32_t r : regs) text.append(reinterpret_cast<const char*>(&r), 4);
  return text;
}
#endif

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c) && c != '\0'; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

int usable_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Distinct (physical id, core id) pairs in /proc/cpuinfo; 0 when the file does not say.
int physical_core_count() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, package = "0";
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "physical id") package = value;
    if (key == "core id") cores.insert({package, value});
  }
  return int(cores.size());
}

// "48K" / "2048K" / "32M" as sysfs writes cache sizes.
uint64_t parse_sysfs_size(const std::string& text) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) value = value * 10 + uint64_t(text[i++] - '0');
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) value <<= 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) value <<= 20;
  return value;
}

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return trim(line);
}

bool caches_from_sysfs(CacheSizes& caches) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = "/sys/devices/system/cpu/cpu0/cache";
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    std::string level = read_line(entry.path() / "level"), type = read_line(entry.path() / "type");
    uint64_t size = parse_sysfs_size(read_line(entry.path() / "size"));
    if (level == "1" && type == "Data") caches.l1d_bytes = size;
    if (level == "2" && type != "Instruction") caches.l2_bytes = size;
    if (level == "3" && type != "Instruction") caches.l3_bytes = size;
  }
  caches.source = "sysfs";
  return caches.l1d_bytes > 0;
}

#if defined(__x86_64__)
// Intel leaf 4 and AMD leaf 0x8000001D share one layout: type, level, ways/partitions/line/sets.
bool caches_from_deterministic_leaf(uint32_t leaf, CacheSizes& caches) {
  for (uint32_t index = 0; index < 16; ++index) {
    CpuidRegs r = cpuid(leaf, index);
    uint32_t type = r.eax & 0x1f;  // 0: no more caches, 1: data, 2: instruction, 3: unified
    if (type == 0) break;
    if (type == 2) continue;
    uint32_t level = (r.eax >> 5) & 0x7;
    uint64_t size = uint64_t((r.ebx >> 22) + 1) * (((r.ebx >> 12) & 0x3ff) + 1) *
                    ((r.ebx & 0xfff) + 1) * (uint64_t(r.ecx) + 1);
    if (level == 1) caches.l1d_bytes = size;
    if (level == 2) caches.l2_bytes = size;
    if (level == 3) caches.l3_bytes = size;
  }
  return caches.l1d_bytes > 0;
}

// AMD's older leaves: L1d KiB in 0x80000005 ECX[31:24], L2 KiB in 0x80000006 ECX[31:16],
// L3 in 512 KiB units in 0x80000006 EDX[31:18].
bool caches_from_amd_legacy_leaves(CacheSizes& caches) {
  CpuidRegs l1 = cpuid(0x80000005), l2l3 = cpuid(0x80000006);
  caches.l1d_bytes = uint64_t(l1.ecx >> 24) << 10;
  caches.l2_bytes = uint64_t(l2l3.ecx >> 16) << 10;
  caches.l3_bytes = uint64_t(l2l3.edx >> 18) * (512u << 10);
  return caches.l1d_bytes > 0;
}
#endif

CacheSizes probe_caches() {
  CacheSizes caches;
  if (caches_from_sysfs(caches)) return caches;
  caches = {};
#if defined(__x86_64__)
  if (caches_from_deterministic_leaf(4, caches)) {
    caches.source = "cpuid leaf 4";
    return caches;
  }
  caches = {};
  if (caches_from_deterministic_leaf(0x8000001d, caches)) {
    caches.source = "cpuid leaf 0x8000001d";
    return caches;
  }
  caches = {};
  if (caches_from_amd_legacy_leaves(caches)) {
    caches.source = "cpuid leaves 0x80000005/6";
    return caches;
  }
#endif
  caches = {};
  caches.source = "unknown";
  return caches;
}

constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

// Linux hands out AMX tile state per process on request; until then the first tile
// instruction raises SIGILL even where cpuid and XCR0 advertise AMX.
[[maybe_unused]] bool request_amx_permission(std::string& why_not) {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
    why_not = std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused: ") + std::strerror(errno);
    return false;
  }
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 || !bit(uint32_t(granted), kXfeatureXtileData)) {
    why_not = "arch_prctl(ARCH_GET_XCOMP_PERM) does not list XTILEDATA after the request";
    return false;
  }
  return true;
#else
  why_not = "no arch_prctl on this platform";
  return false;
#endif
}

#if defined(__x86_64__)
// The steps of probe_isa.

// Vendor and brand strings.
void read_cpu_name(DeviceInfo& device) {
  CpuidRegs vendor = cpuid(0);
  device.vendor = regs_text({vendor.ebx, vendor.edx, vendor.ecx});
  std::string brand;
  for (uint32_t leaf = 0x80000002; leaf <= 0x80000004; ++leaf) {
    CpuidRegs r = cpuid(leaf);
    brand += regs_text({r.eax, r.ebx, r.ecx, r.edx});
  }
  device.name = trim(brand.c_str());
  if (device.name.empty()) device.name = "x86-64 CPU (" + device.vendor + ")";
}

// What cpuid reports, before the OS has its say.
IsaFeatures cpuid_features(const CpuidRegs& leaf1, const CpuidRegs& leaf7, const CpuidRegs& leaf7_1) {
  IsaFeatures reported;
  reported.fma = bit(leaf1.ecx, 12);
  reported.f16c = bit(leaf1.ecx, 29);
  reported.avx2 = bit(leaf7.ebx, 5);
  reported.avx512f = bit(leaf7.ebx, 16);
  reported.avx512dq = bit(leaf7.ebx, 17);
  reported.avx512bw = bit(leaf7.ebx, 30);
  reported.avx512vl = bit(leaf7.ebx, 31);
  reported.avx512_vnni = bit(leaf7.ecx, 11);
  reported.amx_bf16 = bit(leaf7.edx, 22);
  reported.avx512_fp16 = bit(leaf7.edx, 23);
  reported.amx_tile = bit(leaf7.edx, 24);
  reported.amx_int8 = bit(leaf7.edx, 25);
  reported.avx_vnni = bit(leaf7_1.eax, 4);
  reported.avx512_bf16 = bit(leaf7_1.eax, 5);
  return reported;
}

// The reported features less those whose register state the OS does not save (device.os_*).
IsaFeatures usable_features(DeviceInfo& device, const IsaFeatures& reported) {
  IsaFeatures usable = reported;
  if (!device.os_avx_state) {
    if (reported.avx2) device.probe_notes.push_back("AVX/AVX2 reported by cpuid but the OS does not save YMM state: disabled");
    usable.avx2 = usable.fma = usable.f16c = usable.avx_vnni = false;
  }
  if (!device.os_avx512_state) {
    if (reported.avx512f) device.probe_notes.push_back("AVX-512 reported by cpuid but the OS does not save ZMM/opmask state: disabled");
    usable.avx512f = usable.avx512bw = usable.avx512vl = usable.avx512dq = false;
    usable.avx512_bf16 = usable.avx512_fp16 = usable.avx512_vnni = false;
  }
  if (!device.os_amx_state) {
    if (reported.amx_tile) device.probe_notes.push_back("AMX reported by cpuid but XCR0 lacks tile state (kernel without AMX support): disabled");
    usable.amx_tile = usable.amx_bf16 = usable.amx_int8 = false;
  }
  return usable;
}

// Runs (or says why not) the self-test of each instruction family g4 trusts only once tried.
void run_selftests(DeviceInfo& device, const ProbeOptions& options) {
  const IsaFeatures& usable = device.isa;
  auto not_run = [](const std::string& why) { return SelfTest{SelfTestOutcome::NotRun, why}; };
  const std::string no_selftests = "self-tests disabled (ProbeOptions)";
  if (!usable.amx_tile || !usable.amx_bf16) {
    device.amx_bf16_selftest = not_run("no usable AMX-BF16 (cpuid/XCR0)");
  } else if (!device.os_amx_permitted) {
    device.amx_bf16_selftest = not_run("AMX tile state not granted by the OS");
  } else {
    device.amx_bf16_selftest = options.run_selftests ? check_amx_bf16_tile_product() : not_run(no_selftests);
  }
  if (!usable.amx_tile || !usable.amx_int8) {
    device.amx_int8_selftest = not_run("no usable AMX-INT8 (cpuid/XCR0)");
  } else if (!device.os_amx_permitted) {
    device.amx_int8_selftest = not_run("AMX tile state not granted by the OS");
  } else {
    device.amx_int8_selftest = options.run_selftests ? check_amx_int8_tile_product() : not_run(no_selftests);
  }
  if (!usable.avx512_bf16) {
    device.avx512_bf16_selftest = not_run("no usable AVX512_BF16 (cpuid/XCR0)");
  } else {
    device.avx512_bf16_selftest = options.run_selftests ? check_avx512_bf16_dot() : not_run(no_selftests);
  }
  if (!usable.avx512_vnni) {
    device.avx512_vnni_selftest = not_run("no usable AVX512_VNNI (cpuid/XCR0)");
  } else {
    device.avx512_vnni_selftest = options.run_selftests ? check_avx512_vnni_dot() : not_run(no_selftests);
  }
  if (!usable.avx_vnni) {
    device.avx_vnni_selftest = not_run("no usable AVX-VNNI (cpuid/XCR0)");
  } else {
    device.avx_vnni_selftest = options.run_selftests ? check_avx_vnni_dot() : not_run(no_selftests);
  }
  device.neon_dotprod_selftest = not_run("aarch64 unit: not on x86-64");
  for (const SelfTest* t : {&device.amx_bf16_selftest, &device.amx_int8_selftest, &device.avx512_bf16_selftest,
                            &device.avx512_vnni_selftest, &device.avx_vnni_selftest})
    if (t->outcome == SelfTestOutcome::Failed) device.probe_notes.push_back("self-test failed: " + t->detail);
}
#endif

void probe_isa(DeviceInfo& device, const ProbeOptions& options) {
#if defined(__x86_64__)
  read_cpu_name(device);
  CpuidRegs leaf1 = cpuid(1), leaf7 = cpuid(7, 0), leaf7_1 = cpuid(7, 1);
  uint64_t xcr0 = bit(leaf1.ecx, 27) ? read_xcr0() : 0;  // OSXSAVE: XGETBV is allowed
  device.os_avx_state = (xcr0 & 0x6) == 0x6;              // SSE + YMM
  device.os_avx512_state = device.os_avx_state && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  device.os_amx_state = (xcr0 & (3ull << 17)) == (3ull << 17);             // XTILECFG + XTILEDATA
  device.isa = usable_features(device, cpuid_features(leaf1, leaf7, leaf7_1));
  if (device.isa.amx_tile) {
    std::string why_not = "permission not requested (ProbeOptions)";
    device.os_amx_permitted = options.request_amx_permission && request_amx_permission(why_not);
    if (!device.os_amx_permitted) device.probe_notes.push_back("AMX unusable: " + why_not);
  }
  run_selftests(device, options);
#elif defined(__aarch64__)
  probe_arm_isa(device, options);
#else
  device.arch = CpuArch::Other;
  device.name = "non-x86 CPU";
  device.probe_notes.push_back("ISA probe implemented for x86-64 and aarch64 only: scalar kernels");
#endif
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

DeviceInfo probe_cpu(const ProbeOptions& options) {
  DeviceInfo device;
  device.kind = DeviceKind::Cpu;
  device.logical_cores = usable_cpu_count();
  device.physical_cores = physical_core_count();
  device.caches = probe_caches();
  probe_isa(device, options);
  return device;
}

const DeviceInfo& host_cpu() {
  static const DeviceInfo device = probe_cpu();
  return device;
}

std::string_view int8_dot_name(Int8Dot t) {
  switch (t) {
    case Int8Dot::Avx2: return "avx2";
    case Int8Dot::AvxVnni: return "avx-vnni";
    case Int8Dot::Avx512Vnni: return "avx512-vnni";
    case Int8Dot::NeonDot: return "neon-dotprod";
    case Int8Dot::None: break;
  }
  return "none";
}

std::string_view int8_dot_instruction(Int8Dot t) {
  switch (t) {
    case Int8Dot::Avx2: return "VPMADDUBSW + VPMADDWD (AVX2)";
    case Int8Dot::AvxVnni: return "VPDPBUSD (AVX-VNNI, 256-bit)";
    case Int8Dot::Avx512Vnni: return "VPDPBUSD (AVX512_VNNI)";
    case Int8Dot::NeonDot: return "SDOT (NEON dotprod)";
    case Int8Dot::None: break;
  }
  return "none";
}

std::optional<Int8Dot> int8_dot_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (Int8Dot t : {Int8Dot::None, Int8Dot::Avx2, Int8Dot::AvxVnni, Int8Dot::Avx512Vnni, Int8Dot::NeonDot})
    if (lower == int8_dot_name(t)) return t;
  return std::nullopt;
}

std::string_view selftest_outcome_name(SelfTestOutcome outcome) {
  switch (outcome) {
    case SelfTestOutcome::NotRun: return "not run";
    case SelfTestOutcome::Passed: return "passed";
    case SelfTestOutcome::Failed: return "failed";
  }
  return "?";
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = double(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == double(uint64_t(value)))
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(value), units[unit]);
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

namespace {
std::vector<std::pair<const char*, bool>> feature_list(const DeviceInfo& d) {
  if (d.arch == CpuArch::Aarch64) return arm_feature_list(d.isa);
  const IsaFeatures& f = d.isa;
  return {{"avx2", f.avx2},           {"fma", f.fma},
          {"f16c", f.f16c},           {"avx512f", f.avx512f},
          {"avx512bw", f.avx512bw},   {"avx512vl", f.avx512vl},
          {"avx512dq", f.avx512dq},   {"avx512_bf16", f.avx512_bf16},
          {"avx512_fp16", f.avx512_fp16}, {"avx_vnni", f.avx_vnni},
          {"avx512_vnni", f.avx512_vnni}, {"amx_tile", f.amx_tile},
          {"amx_bf16", f.amx_bf16},   {"amx_int8", f.amx_int8}};
}
}  // namespace

std::string describe_device(const DeviceInfo& d) {
  std::ostringstream out;
  if (d.kind == DeviceKind::Cuda) {
    out << "device: cuda \"" << d.name << "\", compute capability " << d.gpu.compute_major << "."
        << d.gpu.compute_minor << ", " << d.gpu.sm_count << " SMs, " << format_bytes(d.gpu.smem_per_block_bytes)
        << " shared memory per block";
    if (d.gpu.memory_bytes) out << ", " << format_bytes(d.gpu.memory_bytes) << " memory";
    out << "\n";
    for (const auto& note : d.probe_notes) out << "  note: " << note << "\n";
    return out.str();
  }
  out << "device: cpu \"" << d.name << "\"";
  if (!d.vendor.empty()) out << " (" << d.vendor << ")";
  out << "\n  cores: " << d.logical_cores << " logical";
  if (d.physical_cores > 0) out << ", " << d.physical_cores << " physical";
  out << "\n  caches: L1d " << format_bytes(d.caches.l1d_bytes) << "/core, L2 " << format_bytes(d.caches.l2_bytes)
      << "/core, L3 " << format_bytes(d.caches.l3_bytes) << " shared (from " << d.caches.source << ")\n";
  out << "  isa:";
  for (auto [name, on] : feature_list(d))
    if (on) out << " " << name;
  out << "\n  absent:";
  for (auto [name, on] : feature_list(d))
    if (!on) out << " " << name;
  out << "\n";
  if (d.arch == CpuArch::Aarch64) {  // no OS state to report: the hwcaps are the kernel's word
    const SelfTest& t = d.neon_dotprod_selftest;
    out << "  self-test neon-dotprod: " << selftest_outcome_name(t.outcome) << (t.detail.empty() ? "" : " (" + t.detail + ")")
        << " -> " << (d.neon_dotprod_usable() ? "used" : "not used") << "\n";
    const std::string idle = arm_units_without_kernel(d.isa);
    out << "  int8 weight products on: " << int8_dot_instruction(d.int8_dot())
        << (idle.empty() ? "" : " (this CPU also offers " + idle + ": no aarch64 kernel for them yet)") << "\n";
    for (const auto& note : d.probe_notes) out << "  note: " << note << "\n";
    return out.str();
  }
  out << "  os state: avx " << yes_no(d.os_avx_state) << ", avx512 " << yes_no(d.os_avx512_state) << ", amx tiles "
      << yes_no(d.os_amx_state) << ", amx permission " << (d.isa.amx_tile ? yes_no(d.os_amx_permitted) : "not requested")
      << "\n";
  auto selftest_line = [&](const char* unit, const SelfTest& t, bool usable) {
    out << "  self-test " << unit << ": " << selftest_outcome_name(t.outcome);
    if (!t.detail.empty()) out << " (" << t.detail << ")";
    out << " -> " << (usable ? "used" : "not used") << "\n";
  };
  selftest_line("amx-bf16", d.amx_bf16_selftest, d.amx_bf16_usable());
  selftest_line("amx-int8", d.amx_int8_selftest, d.amx_int8_usable());
  selftest_line("avx512-bf16", d.avx512_bf16_selftest, d.avx512_bf16_usable());
  selftest_line("avx512-vnni", d.avx512_vnni_selftest, d.avx512_vnni_usable());
  selftest_line("avx-vnni", d.avx_vnni_selftest, d.avx_vnni_usable());
  out << "  int8 weight products on: " << int8_dot_instruction(d.int8_dot()) << "\n";
  for (const auto& note : d.probe_notes) out << "  note: " << note << "\n";
  return out.str();
}

nlohmann::json device_to_json(const DeviceInfo& d) {
  nlohmann::json j;
  j["kind"] = d.kind == DeviceKind::Cpu ? "cpu" : "cuda";
  j["name"] = d.name;
  j["vendor"] = d.vendor;
  j["logical_cores"] = d.logical_cores;
  j["physical_cores"] = d.physical_cores;
  j["caches"] = {{"l1d_bytes", d.caches.l1d_bytes},
                 {"l2_bytes", d.caches.l2_bytes},
                 {"l3_bytes", d.caches.l3_bytes},
                 {"source", d.caches.source}};
  nlohmann::json isa = nlohmann::json::object();
  for (auto [name, on] : feature_list(d)) isa[name] = on;
  j["isa"] = isa;
  j["os_state"] = {{"avx", d.os_avx_state},
                   {"avx512", d.os_avx512_state},
                   {"amx", d.os_amx_state},
                   {"amx_permitted", d.os_amx_permitted}};
  auto selftest = [](const SelfTest& t, bool usable) {
    return nlohmann::json{{"outcome", std::string(selftest_outcome_name(t.outcome))}, {"detail", t.detail}, {"used", usable}};
  };
  j["self_tests"] = {{"amx_bf16", selftest(d.amx_bf16_selftest, d.amx_bf16_usable())},
                     {"amx_int8", selftest(d.amx_int8_selftest, d.amx_int8_usable())},
                     {"avx512_bf16", selftest(d.avx512_bf16_selftest, d.avx512_bf16_usable())},
                     {"avx512_vnni", selftest(d.avx512_vnni_selftest, d.avx512_vnni_usable())},
                     {"avx_vnni", selftest(d.avx_vnni_selftest, d.avx_vnni_usable())},
                     {"neon_dotprod", selftest(d.neon_dotprod_selftest, d.neon_dotprod_usable())}};
  j["int8_dot"] = {{"tier", std::string(int8_dot_name(d.int8_dot()))},
                   {"instruction", std::string(int8_dot_instruction(d.int8_dot()))}};
  if (d.kind == DeviceKind::Cuda)
    j["gpu"] = {{"compute_capability", std::to_string(d.gpu.compute_major) + "." + std::to_string(d.gpu.compute_minor)},
                {"smem_per_block_bytes", d.gpu.smem_per_block_bytes},
                {"sm_count", d.gpu.sm_count},
                {"memory_bytes", d.gpu.memory_bytes}};
  j["notes"] = d.probe_notes;
  return j;
}

}  // namespace g4
