#include "platform/device.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/device_presets.h"

namespace g4 {

TEST(DeviceProbe, HostCpuHasCoresAndCaches) {
  const DeviceInfo& d = host_cpu();
  EXPECT_EQ(d.kind, DeviceKind::Cpu);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.logical_cores, 1);
  EXPECT_GE(d.physical_cores, 0);
  EXPECT_GT(d.caches.l1d_bytes, 0u) << d.caches.source;
  EXPECT_GT(d.caches.l2_bytes, 0u) << d.caches.source;
  EXPECT_GE(d.caches.l2_bytes, d.caches.l1d_bytes);
  EXPECT_NE(d.caches.source, "unknown");
}

// What a CPU that reports the later feature must also report; a probe that disagrees misreads bits.
TEST(DeviceProbe, FeatureImplicationsHold) {
  const IsaFeatures& f = host_cpu().isa;
  if (f.avx512bw || f.avx512vl || f.avx512dq || f.avx512_bf16 || f.avx512_fp16 || f.avx512_vnni) {
    EXPECT_TRUE(f.avx512f);
  }
  if (f.avx512f) { EXPECT_TRUE(f.avx2); }
  if (f.avx512f) { EXPECT_TRUE(host_cpu().os_avx512_state); }
  if (f.avx2) { EXPECT_TRUE(host_cpu().os_avx_state); }
  if (f.amx_bf16 || f.amx_int8) { EXPECT_TRUE(f.amx_tile); }
  if (f.amx_tile) { EXPECT_TRUE(host_cpu().os_amx_state); }
  if (f.neon_dotprod || f.i8mm || f.arm_bf16 || f.fp16 || f.sve) { EXPECT_TRUE(f.neon); }
  if (f.sve2) { EXPECT_TRUE(f.sve); }
}

// The probe fills the half of IsaFeatures of the architecture it was built for, and only that.
TEST(DeviceProbe, ArchitectureMatchesTheBuild) {
  const DeviceInfo& d = host_cpu();
  const IsaFeatures& f = d.isa;
#if defined(__x86_64__)
  EXPECT_EQ(d.arch, CpuArch::X86_64);
  EXPECT_FALSE(f.neon || f.neon_dotprod || f.i8mm || f.arm_bf16 || f.sve || f.sve2 || f.fp16);
  EXPECT_FALSE(d.neon_dotprod_usable());
  EXPECT_FALSE(d.runs_int8_tier(Int8Dot::NeonDot));
#elif defined(__aarch64__)
  EXPECT_EQ(d.arch, CpuArch::Aarch64);
  EXPECT_TRUE(f.neon) << "every aarch64 Linux CPU g4 runs on has Advanced SIMD";
  EXPECT_FALSE(f.avx2 || f.fma || f.f16c || f.avx512f || f.avx_vnni || f.avx512_vnni || f.amx_tile);
  // SDOT where the hwcaps list dotprod and the self-test passed (qemu's "max" CPU has it).
  EXPECT_EQ(d.int8_dot(), f.neon_dotprod && d.neon_dotprod_selftest.passed() ? Int8Dot::NeonDot : Int8Dot::None);
  if (f.neon_dotprod) {
    EXPECT_TRUE(d.neon_dotprod_selftest.passed()) << d.neon_dotprod_selftest.detail;
  }
  EXPECT_FALSE(d.runs_int8_tier(Int8Dot::Avx2));
#else
  GTEST_SKIP() << "no ISA probe for this architecture";
#endif
}

TEST(DeviceProbe, OptionalUnitsUsedOnlyWhenConfirmed) {
  const DeviceInfo& d = host_cpu();
  if (d.amx_bf16_usable()) {
    EXPECT_TRUE(d.os_amx_permitted);
    EXPECT_TRUE(d.amx_bf16_selftest.passed());
  }
  if (!d.isa.amx_tile) {
    EXPECT_EQ(d.amx_bf16_selftest.outcome, SelfTestOutcome::NotRun);
    EXPECT_EQ(d.amx_int8_selftest.outcome, SelfTestOutcome::NotRun);
  }
  if (d.isa.avx512_bf16) { EXPECT_NE(d.avx512_bf16_selftest.outcome, SelfTestOutcome::NotRun); }
}

TEST(DeviceProbe, ProbeWithoutSelfTestsLeavesUnitsUnconfirmed) {
  ProbeOptions options;
  options.run_selftests = false;
  DeviceInfo d = probe_cpu(options);
  EXPECT_FALSE(d.amx_bf16_usable());
  EXPECT_FALSE(d.amx_int8_usable());
  EXPECT_FALSE(d.avx512_bf16_usable());
  EXPECT_EQ(d.isa.avx2, host_cpu().isa.avx2);  // same cpuid bits either way
}

TEST(DeviceProbe, DescribeAndJsonNameTheDevice) {
  const DeviceInfo& d = host_cpu();
  std::string text = describe_device(d);
  EXPECT_NE(text.find(d.name), std::string::npos) << text;
  EXPECT_NE(text.find("L1d"), std::string::npos) << text;
  nlohmann::json j = device_to_json(d);
  if (d.arch == CpuArch::Aarch64) {  // the ARM features, and no x86 self-test lines
    EXPECT_NE(text.find("self-test neon-dotprod: "), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("int8 weight products on: ") + std::string(int8_dot_instruction(d.int8_dot()))),
              std::string::npos) << text;
    EXPECT_EQ(text.find("self-test amx-bf16"), std::string::npos) << text;
    EXPECT_EQ(j["isa"]["neon"], d.isa.neon);
  } else {
    EXPECT_NE(text.find("self-test amx-bf16"), std::string::npos) << text;
    EXPECT_EQ(j["isa"]["avx2"], d.isa.avx2);
  }
  EXPECT_EQ(j["kind"], "cpu");
  EXPECT_EQ(j["caches"]["l1d_bytes"], d.caches.l1d_bytes);
  EXPECT_TRUE(j["self_tests"]["amx_bf16"].contains("outcome"));
}

TEST(DeviceProbe, GpuPresetDescribesItsLimits) {
  DeviceInfo t4 = presets::t4_sm75();
  std::string text = describe_device(t4);
  EXPECT_NE(text.find("compute capability 7.5"), std::string::npos) << text;
  EXPECT_NE(text.find("64 KiB shared memory per block"), std::string::npos) << text;
  EXPECT_EQ(device_to_json(t4)["gpu"]["smem_per_block_bytes"], 65536u);
}

TEST(DevicePresets, ArmPresetsReportArmFeatures) {
  const DeviceInfo v1 = presets::neoverse_v1();
  const std::string text = describe_device(v1);
  EXPECT_NE(text.find("isa: neon neon_dotprod i8mm arm_bf16 sve fp16"), std::string::npos) << text;
  EXPECT_NE(text.find("absent: sve2"), std::string::npos) << text;
  EXPECT_NE(text.find("int8 weight products on: SDOT (NEON dotprod) (this CPU also offers SMMLA (i8mm), "
                      "BFDOT/BFMMLA (bf16), SVE, FP16 arithmetic (fphp): no aarch64 kernel for them yet)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("self-test neon-dotprod: passed (preset) -> used"), std::string::npos) << text;
  EXPECT_EQ(text.find("avx"), std::string::npos) << text;
  const nlohmann::json j = device_to_json(presets::apple_m2());
  EXPECT_EQ(j["isa"]["i8mm"], true);
  EXPECT_EQ(j["isa"]["sve"], false);
  EXPECT_FALSE(j["isa"].contains("avx2"));
  EXPECT_EQ(j["int8_dot"]["tier"], "neon-dotprod");
  EXPECT_EQ(j["self_tests"]["neon_dotprod"]["used"], true);
  // The x86 report keeps its x86 list: no ARM name in it.
  EXPECT_EQ(describe_device(presets::zen4()).find("neon"), std::string::npos);
}

TEST(DevicePresets, SharedMemoryOptInFigures) {
  EXPECT_EQ(presets::cuda_max_smem_per_block(7, 5), 64u * 1024);
  EXPECT_EQ(presets::cuda_max_smem_per_block(8, 6), 99u * 1024);
  EXPECT_EQ(presets::cuda_max_smem_per_block(8, 9), 101376u);
  EXPECT_EQ(presets::cuda_max_smem_per_block(9, 0), 232448u);
  EXPECT_EQ(presets::h100_sm90().gpu.compute_capability(), 90);
}

TEST(FormatBytes, PicksTheLargestWholeUnit) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(48 * 1024), "48 KiB");
  EXPECT_EQ(format_bytes(2 * 1024 * 1024), "2 MiB");
  EXPECT_EQ(format_bytes(1536 * 1024), "1.5 MiB");
}

}  // namespace g4
