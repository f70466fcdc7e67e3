#include "platform/isa_arm.h"

#include <cstdio>
#include <fstream>
#include <map>

#if defined(__aarch64__) && defined(__linux__)
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstdint>

#include "platform/target_attributes.h"
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

#if defined(__aarch64__) && defined(__linux__)
// Four int32 lanes += four s8 quads each, on the instruction (compiled for dotprod only here).
G4_TARGET_NEON_DOTPROD void sdot16(const int8_t* a, const int8_t* b, int32_t* c) {
  vst1q_s32(c, vdotq_s32(vld1q_s32(c), vld1q_s8(a), vld1q_s8(b)));
}
#endif

}  // namespace

SelfTest check_neon_dotprod() {
#if defined(__aarch64__) && defined(__linux__)
  // Extremes (-128 x -128, 127 x -128) and mixed signs, so that a wrong signedness or lane order shows.
  int8_t a[16], b[16];
  int32_t got[4] = {1000, -1000, 7, 0}, want[4] = {1000, -1000, 7, 0};
  for (int i = 0; i < 16; ++i) {
    a[i] = int8_t(i % 3 == 0 ? -128 : i * 13 - 100);
    b[i] = int8_t(i % 4 == 1 ? -128 : 127 - i * 17);
    want[i / 4] += int32_t(a[i]) * int32_t(b[i]);
  }
  sdot16(a, b, got);
  for (int l = 0; l < 4; ++l)
    if (got[l] != want[l])
      return {SelfTestOutcome::Failed, "SDOT lane " + std::to_string(l) + ": " + std::to_string(got[l]) +
                                           ", the scalar path " + std::to_string(want[l])};
  return {SelfTestOutcome::Passed, "4-lane s8 x s8 quad dot product matches the scalar path"};
#else
  return {SelfTestOutcome::NotRun, "aarch64 unit: not on this architecture"};
#endif
}

void probe_arm_isa(DeviceInfo& device, const ProbeOptions& options) {
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
  if (!device.isa.neon_dotprod)
    device.neon_dotprod_selftest = {SelfTestOutcome::NotRun, "no dotprod (asimddp) in the hwcaps"};
  else if (!options.run_selftests)
    device.neon_dotprod_selftest = {SelfTestOutcome::NotRun, "self-tests disabled (ProbeOptions)"};
  else
    device.neon_dotprod_selftest = check_neon_dotprod();
  if (device.neon_dotprod_selftest.outcome == SelfTestOutcome::Failed)
    device.probe_notes.push_back("self-test failed: " + device.neon_dotprod_selftest.detail);
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
  add(f.i8mm, "SMMLA (i8mm)");
  add(f.arm_bf16, "BFDOT/BFMMLA (bf16)");
  add(f.sve, "SVE");
  add(f.sve2, "SVE2");
  add(f.fp16, "FP16 arithmetic (fphp)");
  return units;
}

}  // namespace g4
