#include "platform/isa_arm.h"

#include <cstdio>
#include <fstream>
#include <map>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace g4 {
namespace {

// "CPU implementer : 0x41" -> "0x41"; "" when /proc/cpuinfo has no such line (qemu-user shows the
// host's file).
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string implementer_name(const std::string& code) {
  static const std::map<std::string, std::string> names = {
      {"0x41", "ARM"}, {"0x42", "Broadcom"}, {"0x43", "Cavium"}, {"0x48", "HiSilicon"}, {"0x4e", "NVIDIA"},
      {"0x51", "Qualcomm"}, {"0x61", "Apple"}, {"0x6d", "Microsoft"}, {"0xc0", "Ampere"}};
  auto it = names.find(code);
  return it == names.end() ? code : it->second;
}

}  // namespace

void probe_arm_isa(DeviceInfo& device) {
  device.arch = CpuArch::Aarch64;
#if defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  IsaFeatures& f = device.isa;
  f.neon = hwcap & HWCAP_ASIMD;
  f.neon_dotprod = hwcap & HWCAP_ASIMDDP;
  f.fp16 = (hwcap & HWCAP_FPHP) && (hwcap & HWCAP_ASIMDHP);
  f.sve = hwcap & HWCAP_SVE;
  f.sve2 = hwcap2 & HWCAP2_SVE2;
  f.i8mm = hwcap2 & HWCAP2_I8MM;
  f.arm_bf16 = hwcap2 & HWCAP2_BF16;
  if (f.neon && !(hwcap & HWCAP_AES))  // Highway's NEON target on aarch64 requires the AES instructions
    device.probe_notes.push_back("no AES instructions: Highway dispatches its portable EMU128 target, not NEON");
#endif
  const SelfTest x86_only{SelfTestOutcome::NotRun, "x86 unit: not on aarch64"};
  for (SelfTest* t : {&device.amx_bf16_selftest, &device.amx_int8_selftest, &device.avx512_bf16_selftest,
                      &device.avx512_vnni_selftest, &device.avx_vnni_selftest})
    *t = x86_only;
  const std::string implementer = cpuinfo_field("CPU implementer"), part = cpuinfo_field("CPU part");
  device.name = "aarch64 CPU";
  if (!implementer.empty()) {
    device.vendor = implementer_name(implementer);
    device.name += " (implementer " + implementer + (part.empty() ? "" : ", part " + part) + ")";
  }
}

std::vector<std::pair<const char*, bool>> arm_feature_list(const IsaFeatures& f) {
  return {{"neon", f.neon}, {"neon_dotprod", f.neon_dotprod}, {"i8mm", f.i8mm}, {"arm_bf16", f.arm_bf16},
          {"sve", f.sve},   {"sve2", f.sve2},                 {"fp16", f.fp16}};
}

std::string arm_int8_units(const IsaFeatures& f) {
  if (f.neon_dotprod && f.i8mm) return "SDOT/UDOT (dotprod) and SMMLA (i8mm)";
  if (f.neon_dotprod) return "SDOT/UDOT (dotprod)";
  if (f.i8mm) return "SMMLA (i8mm)";
  return "";
}

std::string arm_units_without_kernel(const IsaFeatures& f) {
  std::string units;
  auto add = [&units](bool present, const char* unit) {
    if (!present) return;
    if (!units.empty()) units += ", ";
    units += unit;
  };
  add(f.neon_dotprod, "SDOT/UDOT (dotprod)");
  add(f.i8mm, "SMMLA (i8mm)");
  add(f.arm_bf16, "BFDOT/BFMMLA (bf16)");
  add(f.sve, "SVE");
  add(f.sve2, "SVE2");
  add(f.fp16, "FP16 arithmetic (fphp)");
  return units;
}

}  // namespace g4
