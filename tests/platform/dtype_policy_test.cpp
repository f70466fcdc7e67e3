#include "platform/dtype_policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/device_presets.h"
#include "platform/error.h"

namespace g4 {
namespace {

using F = NumFormat;

struct PolicyRow {
  const char* case_name;
  DeviceInfo device;
  NumFormat checkpoint;
  UserRequest request;
  NumFormat compute, weights, kv;
  const char* kernel_family;
  const char* warning_contains;       // nullptr: no warnings expected
  const char* kernel_reason_contains;  // nullptr: not checked
};

std::vector<PolicyRow> policy_table() {
  using namespace presets;
  return {
      // An AVX2-only laptop: f32 math, bf16 weights kept (widening is a shift), f16 KV through F16C.
      {"avx2 bf16", avx2_laptop(), F::BF16, {}, F::F32, F::BF16, F::F16, "avx2-fma", nullptr, nullptr},
      {"avx2 f32", avx2_laptop(), F::F32, {}, F::F32, F::F32, F::F16, "avx2-fma", nullptr, nullptr},
      {"avx2 f16", avx2_laptop(), F::F16, {}, F::F32, F::F16, F::F16, "avx2-fma", nullptr, nullptr},
      {"avx2 q8", avx2_laptop(), F::Q8, {}, F::F32, F::Q8, F::F16, "avx2-fma", nullptr, nullptr},
      // Forced emulated dtypes: allowed, with the cost stated.
      {"avx2 forced bf16", avx2_laptop(), F::BF16, {F::BF16, {}, {}}, F::BF16, F::BF16, F::F16, "avx2-fma", "87%",
       "widened to f32"},
      {"avx2 forced f16 math", avx2_laptop(), F::BF16, {F::F16, {}, {}}, F::F16, F::BF16, F::F16, "avx2-fma",
       "f16 arithmetic is emulated", nullptr},
      {"avx2 forced fp8 kv", avx2_laptop(), F::BF16, {{}, F::F8E4M3, {}}, F::F32, F::BF16, F::F8E4M3, "avx2-fma",
       "fp8 KV cache is emulated", nullptr},
      {"avx2 bf16->f16 weights", avx2_laptop(), F::BF16, {{}, {}, F::F16}, F::F32, F::F16, F::F16, "avx2-fma",
       "65504", nullptr},
      {"avx2 quantize at load", avx2_laptop(), F::BF16, {{}, {}, F::Q4}, F::F32, F::Q4, F::F16, "avx2-fma", nullptr,
       nullptr},
      {"baseline x86", baseline_x86(), F::BF16, {}, F::F32, F::BF16, F::F32, "scalar", nullptr, nullptr},
      {"baseline f16 ckpt", baseline_x86(), F::F16, {}, F::F32, F::F32, F::F32, "scalar", nullptr, nullptr},
      // A CPU with AMX confirmed, and the same CPU when the OS refuses tiles or the self-test fails.
      {"spr bf16", sapphire_rapids(), F::BF16, {}, F::BF16, F::BF16, F::BF16, "amx-bf16", nullptr, "self-test"},
      {"spr f32", sapphire_rapids(), F::F32, {}, F::F32, F::F32, F::F16, "avx512", nullptr, nullptr},
      {"spr f32 forced bf16", sapphire_rapids(), F::F32, {F::BF16, {}, {}}, F::BF16, F::F32, F::BF16, "amx-bf16",
       nullptr, nullptr},
      {"spr amx refused", sapphire_rapids_amx_refused(), F::BF16, {}, F::BF16, F::BF16, F::BF16, "avx512-bf16",
       nullptr, "did not grant tile state, so g4 falls back to avx512-bf16"},
      {"spr amx self-test failed", sapphire_rapids_amx_selftest_failed(), F::BF16, {}, F::BF16, F::BF16, F::BF16,
       "avx512-bf16", nullptr, "self-test failed"},
      // GPUs we do not have.
      {"t4 bf16", t4_sm75(), F::BF16, {}, F::F16, F::F16, F::F16, "cuda-tc-f16", nullptr, nullptr},
      {"t4 q4", t4_sm75(), F::Q4, {}, F::F16, F::Q4, F::F16, "cuda-tc-f16", nullptr, nullptr},
      {"t4 forced bf16", t4_sm75(), F::BF16, {F::BF16, {}, {}}, F::BF16, F::BF16, F::F16, "cuda-f32", "87%", nullptr},
      {"t4 forced fp8 kv", t4_sm75(), F::BF16, {{}, F::F8E4M3, {}}, F::F16, F::F16, F::F8E4M3, "cuda-tc-f16",
       "fp8 KV cache is emulated", nullptr},
      {"l4 bf16", l4_sm89(), F::BF16, {}, F::BF16, F::BF16, F::BF16, "cuda-tc-bf16", nullptr, nullptr},
      {"l4 fp8 kv", l4_sm89(), F::BF16, {{}, F::F8E4M3, {}}, F::BF16, F::BF16, F::F8E4M3, "cuda-tc-bf16", nullptr,
       nullptr},
      {"l4 f16 ckpt", l4_sm89(), F::F16, {}, F::F16, F::F16, F::F16, "cuda-tc-f16", nullptr, nullptr},
      {"h100 bf16", h100_sm90(), F::BF16, {}, F::BF16, F::BF16, F::BF16, "cuda-tc-bf16", nullptr, nullptr},
      {"h100 q4", h100_sm90(), F::Q4, {}, F::BF16, F::Q4, F::BF16, "cuda-tc-bf16", nullptr, nullptr},
      {"h100 f32", h100_sm90(), F::F32, {}, F::F32, F::F32, F::F16, "cuda-f32", nullptr, nullptr},
  };
}

}  // namespace

TEST(DtypePolicy, Table) {
  for (const PolicyRow& row : policy_table()) {
    SCOPED_TRACE(row.case_name);
    DevicePolicy p = resolve_policy(row.device, row.checkpoint, row.request);
    EXPECT_EQ(num_format_name(p.compute), num_format_name(row.compute));
    EXPECT_EQ(num_format_name(p.weights), num_format_name(row.weights));
    EXPECT_EQ(num_format_name(p.kv), num_format_name(row.kv));
    EXPECT_EQ(p.kernel_family, row.kernel_family);
    for (const std::string& reason : p.reasons()) EXPECT_FALSE(reason.empty());
    if (row.warning_contains == nullptr) {
      EXPECT_TRUE(p.warnings.empty()) << describe_policy(p);
    } else {
      bool found = false;
      for (const auto& w : p.warnings) found |= w.find(row.warning_contains) != std::string::npos;
      EXPECT_TRUE(found) << "no warning containing '" << row.warning_contains << "' in\n" << describe_policy(p);
    }
    if (row.kernel_reason_contains != nullptr) {
      EXPECT_NE(p.kernel_reason.find(row.kernel_reason_contains), std::string::npos) << p.kernel_reason;
    }
  }
}

TEST(DtypePolicy, ReasonsNameTheMissingUnit) {
  DevicePolicy laptop = resolve_policy(presets::avx2_laptop(), F::BF16);
  EXPECT_NE(laptop.compute_reason.find("AVX512_BF16"), std::string::npos) << laptop.compute_reason;
  DevicePolicy t4 = resolve_policy(presets::t4_sm75(), F::BF16);
  EXPECT_NE(t4.compute_reason.find("sm_75"), std::string::npos) << t4.compute_reason;
  EXPECT_NE(t4.compute_reason.find("no bf16"), std::string::npos) << t4.compute_reason;
}

TEST(DtypePolicy, IsPure) {
  DeviceInfo d = presets::sapphire_rapids_amx_refused();
  UserRequest r{F::BF16, F::F16, {}};
  DevicePolicy a = resolve_policy(d, F::BF16, r), b = resolve_policy(d, F::BF16, r);
  EXPECT_EQ(describe_policy(a), describe_policy(b));
  EXPECT_EQ(policy_to_json(a), policy_to_json(b));
}

TEST(DtypePolicy, RefusesNonsenseRequestsNamingTheFlag) {
  auto expect_refusal = [](const DeviceInfo& d, NumFormat ckpt, UserRequest r, const std::string& needle) {
    try {
      resolve_policy(d, ckpt, r);
      ADD_FAILURE() << "expected g4::Error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refusal(presets::avx2_laptop(), F::BF16, {F::Q4, {}, {}}, "--compute q4");
  expect_refusal(presets::h100_sm90(), F::BF16, {F::F8E4M3, {}, {}}, "--compute fp8");
  expect_refusal(presets::avx2_laptop(), F::BF16, {{}, F::Q8, {}}, "--kv q8");
  expect_refusal(presets::avx2_laptop(), F::BF16, {{}, {}, F::F8E4M3}, "--weights fp8");
  expect_refusal(presets::avx2_laptop(), F::F8E4M3, {}, "checkpoint fp8");
}

TEST(DtypePolicy, ParsesFormatNames) {
  EXPECT_EQ(parse_num_format("BF16", "--compute"), F::BF16);
  EXPECT_EQ(parse_num_format("float32", "--compute"), F::F32);
  EXPECT_EQ(parse_num_format("q4_0", "--weights"), F::Q4);
  try {
    parse_num_format("int3", "--kv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv: unknown number format 'int3'"), std::string::npos) << e.what();
  }
}

TEST(DtypePolicy, DescribeShowsDecisionsReasonsAndWarnings) {
  DevicePolicy p = resolve_policy(presets::avx2_laptop(), F::BF16, {F::BF16, {}, {}});
  std::string text = describe_policy(p);
  EXPECT_NE(text.find("policy: compute bf16, weights bf16, kv f16, kernels avx2-fma"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: bf16 is emulated through f32 conversion"), std::string::npos) << text;
  nlohmann::json j = policy_to_json(p);
  EXPECT_EQ(j["compute"], "bf16");
  EXPECT_EQ(j["warnings"].size(), 1u);
}

// q8/q4 weights multiply int8 activations only where int8 dot products are native and confirmed.
TEST(DtypePolicy, ActivationsForQuantizedWeights) {
  struct Row {
    const char* name;
    DeviceInfo device;
    NumFormat checkpoint;
    UserRequest request;
    NumFormat activations;
    const char* reason_contains;
  };
  DeviceInfo vnni_failed = presets::sapphire_rapids();
  vnni_failed.avx512_vnni_selftest = {SelfTestOutcome::Failed, "VPDPBUSD: C[0][3] differs"};
  const std::vector<Row> rows = {
      {"spr q8 checkpoint", presets::sapphire_rapids(), F::Q8, {}, F::Q8, "AVX512_VNNI"},
      {"spr q8: prefill on int8 tiles", presets::sapphire_rapids(), F::Q8, {}, F::Q8, "prefill on AMX-INT8 tiles"},
      {"spr q4 checkpoint", presets::sapphire_rapids(), F::Q4, {}, F::Q8, "absmax/254"},
      {"spr bf16 quantized at load", presets::sapphire_rapids(), F::BF16, {{}, {}, F::Q4}, F::Q8, "q4 weights"},
      {"spr q8 forced f32", presets::sapphire_rapids(), F::Q8, {F::F32, {}, {}}, F::F32, "--compute f32"},
      {"spr bf16 weights", presets::sapphire_rapids(), F::BF16, {}, F::BF16, "not block-quantized"},
      // A failed AVX512_VNNI check leaves the CPU's next integer dot product, never f32.
      {"spr vnni self-test failed", vnni_failed, F::Q8, {}, F::Q8, "VPDPBUSD (AVX-VNNI, 256-bit)"},
      {"avx2 laptop q8 (AVX-VNNI reported, not confirmed)", presets::avx2_laptop(), F::Q8, {}, F::Q8,
       "VPMADDUBSW + VPMADDWD (AVX2)"},
      {"baseline x86 q8", presets::baseline_x86(), F::Q8, {}, F::F32, "no integer dot product"},
      {"t4 q4", presets::t4_sm75(), F::Q4, {}, F::F16, "widened to f16"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    DevicePolicy p = resolve_policy(row.device, row.checkpoint, row.request);
    EXPECT_EQ(num_format_name(p.activations), num_format_name(row.activations));
    EXPECT_NE(p.activations_reason.find(row.reason_contains), std::string::npos) << p.activations_reason;
    EXPECT_NE(describe_policy(p).find(p.activations_reason), std::string::npos);
    EXPECT_EQ(policy_to_json(p)["activations"], std::string(num_format_name(p.activations)));
  }
  // Only where AMX-INT8 is confirmed: not where the OS refused the tile state.
  const DevicePolicy refused = resolve_policy(presets::sapphire_rapids_amx_refused(), F::Q8);
  EXPECT_EQ(refused.activations_reason.find("AMX-INT8"), std::string::npos) << refused.activations_reason;
}

// Every x86 profile with an integer dot instruction multiplies block-quantized weights by int8
// activations on its best one (named in the reason), never on f32 products; bf16 compute only
// where bf16 is native. The profiles: Zen 2/3 (AVX2), Alder Lake (AVX-VNNI), Ice Lake and Zen 4/5
// (AVX512_VNNI, Zen 4 with BF16), Sapphire Rapids (+ AMX).
TEST(DtypePolicy, EveryCpuProfileWithAnIntegerDotMultipliesBlocksInInt8) {
  struct Profile {
    const char* name;
    DeviceInfo device;
    Int8Dot tier;
    bool bf16;
  };
  const std::vector<Profile> profiles = {
      {"zen3", presets::zen3(), Int8Dot::Avx2, false},
      {"alder lake", presets::alder_lake(), Int8Dot::AvxVnni, false},
      {"ice lake", presets::ice_lake(), Int8Dot::Avx512Vnni, false},
      {"zen4", presets::zen4(), Int8Dot::Avx512Vnni, true},
      {"sapphire rapids", presets::sapphire_rapids(), Int8Dot::Avx512Vnni, true},
  };
  for (const Profile& pr : profiles) {
    SCOPED_TRACE(pr.name);
    EXPECT_EQ(pr.device.int8_dot(), pr.tier);
    EXPECT_TRUE(has_native_int8_dot(pr.device));
    for (NumFormat ckpt : {F::Q8, F::Q4}) {
      const DevicePolicy p = resolve_policy(pr.device, ckpt);
      EXPECT_EQ(p.activations, F::Q8) << describe_policy(p);
      EXPECT_NE(p.activations_reason.find(int8_dot_instruction(pr.tier)), std::string::npos) << p.activations_reason;
    }
    const DevicePolicy bf16 = resolve_policy(pr.device, F::BF16);
    EXPECT_EQ(bf16.compute == F::BF16, pr.bf16) << describe_policy(bf16);
  }
  EXPECT_EQ(presets::baseline_x86().int8_dot(), Int8Dot::None);
}

// The int8 tiers are not nested: AVX512_VNNI parts (Ice Lake, Zen 4) lack AVX-VNNI, and Alder
// Lake has AVX-VNNI without AVX-512. A test or G4_INT8_KERNELS may force only a tier the CPU runs.
TEST(DtypePolicy, Int8TiersAreCheckedOneByOneNotByOrder) {
  using T = Int8Dot;
  struct Row {
    const char* name;
    DeviceInfo device;
    bool avx2, avx_vnni, avx512_vnni;
  };
  const std::vector<Row> rows = {
      {"zen3", presets::zen3(), true, false, false},
      {"alder lake", presets::alder_lake(), true, true, false},
      {"ice lake", presets::ice_lake(), true, false, true},
      {"zen4", presets::zen4(), true, false, true},
      {"baseline", presets::baseline_x86(), false, false, false},
      {"neoverse v2", presets::neoverse_v2(), false, false, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    EXPECT_TRUE(r.device.runs_int8_tier(T::None));
    EXPECT_EQ(r.device.runs_int8_tier(T::Avx2), r.avx2);
    EXPECT_EQ(r.device.runs_int8_tier(T::AvxVnni), r.avx_vnni);
    EXPECT_EQ(r.device.runs_int8_tier(T::Avx512Vnni), r.avx512_vnni);
    EXPECT_TRUE(r.device.runs_int8_tier(r.device.int8_dot()));
  }
}

// aarch64 profiles: Highway's NEON f32 kernels, and SDOT int8 kernels for Q8_0, Q4_0 and K-quant
// blocks. Whatever SMMLA, BF16, FP16 or SVE a CPU offers, the policy keeps f32 compute, takes q8
// activations on SDOT for quantized weights, names
// each idle unit the probe found in its reasons, and claims no kernel g4 lacks (nor any x86 unit).
TEST(DtypePolicy, ArmProfilesNameTheirUnitsAndClaimNoKernel) {
  struct Profile {
    const char* name;
    DeviceInfo device;
    std::vector<std::string> present, absent;  // idle units the kernel reason must and must not name
  };
  const std::vector<Profile> profiles = {
      {"neoverse n1", presets::neoverse_n1(), {"FP16"}, {"SDOT", "SMMLA", "BFDOT", "SVE"}},
      {"neoverse v1", presets::neoverse_v1(), {"SMMLA", "BFDOT", "SVE"}, {"SDOT", "SVE2"}},
      {"neoverse v2", presets::neoverse_v2(), {"SMMLA", "BFDOT", "SVE", "SVE2"}, {"SDOT"}},
      {"apple m2", presets::apple_m2(), {"SMMLA", "BFDOT"}, {"SDOT", "SVE"}},
  };
  for (const Profile& pr : profiles) {
    SCOPED_TRACE(pr.name);
    const DeviceInfo& d = pr.device;
    EXPECT_EQ(d.int8_dot(), Int8Dot::NeonDot);
    EXPECT_TRUE(has_native_int8_dot(d));
    EXPECT_FALSE(has_native_bf16(d));
    EXPECT_FALSE(has_native_f16_math(d));
    for (NumFormat ckpt : {F::Q8, F::Q4, F::BF16, F::F16}) {
      const DevicePolicy p = resolve_policy(d, ckpt);
      const std::string text = describe_policy(p);
      EXPECT_EQ(p.compute, F::F32) << text;
      EXPECT_EQ(p.kv, F::F16) << text;  // NEON converts f16 in one instruction
      EXPECT_EQ(p.kernel_family, "neon");
      EXPECT_TRUE(p.warnings.empty()) << text;
      for (const std::string& unit : pr.present) EXPECT_NE(p.kernel_reason.find(unit), std::string::npos) << unit;
      for (const std::string& unit : pr.absent) EXPECT_EQ(p.kernel_reason.find(unit), std::string::npos) << unit;
      EXPECT_NE(p.kernel_reason.find("no aarch64 kernel for them yet"), std::string::npos) << p.kernel_reason;
      for (const char* x86 : {"AVX", "F16C", "VPDPBUSD", "VDPBF16PS", "AMX"})
        EXPECT_EQ(text.find(x86), std::string::npos) << x86 << " in\n" << text;
      if (ckpt == F::Q8 || ckpt == F::Q4) {
        EXPECT_EQ(p.activations, F::Q8) << text;
        EXPECT_NE(p.activations_reason.find("SDOT (NEON dotprod)"), std::string::npos) << p.activations_reason;
        EXPECT_NE(p.activations_reason.find("Q8_0, Q4_0, Q4_K, Q5_K, Q6_K blocks"), std::string::npos)
            << p.activations_reason;
        EXPECT_EQ(p.activations_reason.find("SMMLA") != std::string::npos, d.isa.i8mm) << p.activations_reason;
        // --compute f32 keeps them f32, and says why.
        const DevicePolicy f32 = resolve_policy(d, ckpt, {F::F32, {}, {}});
        EXPECT_EQ(f32.activations, F::F32);
        EXPECT_NE(f32.activations_reason.find("--compute f32"), std::string::npos) << f32.activations_reason;
      } else {
        EXPECT_EQ(p.activations, F::F32) << text;
      }
      if (ckpt == F::BF16 && d.isa.arm_bf16) {
        EXPECT_NE(p.compute_reason.find("offers BFDOT/BFMMLA (bf16), but g4 has no bf16 kernel for aarch64 yet"),
                  std::string::npos) << p.compute_reason;
      }
    }
  }
  // Without dotprod (Cortex-A72 class): f32 activations, and the reason says SDOT is what is missing.
  DeviceInfo a72 = presets::neoverse_n1();
  a72.isa.neon_dotprod = false;
  EXPECT_EQ(a72.int8_dot(), Int8Dot::None);
  const DevicePolicy old = resolve_policy(a72, F::Q4);
  EXPECT_EQ(old.activations, F::F32);
  EXPECT_NE(old.activations_reason.find("this CPU has no SDOT (dotprod)"), std::string::npos) << old.activations_reason;
  // dotprod listed but its self-test failed: said so, not "no SDOT".
  DeviceInfo failed = presets::neoverse_n1();
  failed.neon_dotprod_selftest = {SelfTestOutcome::Failed, "lane 0 differs"};
  const DevicePolicy broken = resolve_policy(failed, F::Q8);
  EXPECT_EQ(broken.activations, F::F32);
  EXPECT_NE(broken.activations_reason.find("self-test did not pass"), std::string::npos) << broken.activations_reason;
  EXPECT_NE(old.activations_reason.find("below the memory roofline"), std::string::npos) << old.activations_reason;
  // Neoverse N1 has no BF16: said so, not "offers"; forcing bf16 is emulation, with its cost.
  const DevicePolicy n1 = resolve_policy(presets::neoverse_n1(), F::BF16, {F::BF16, {}, {}});
  EXPECT_NE(n1.compute_reason.find("no BF16 extension"), std::string::npos) << n1.compute_reason;
  ASSERT_EQ(n1.warnings.size(), 1u);
  EXPECT_NE(n1.warnings[0].find("bf16 is emulated through f32"), std::string::npos) << n1.warnings[0];
  EXPECT_NE(n1.kernel_reason.find("bf16 operands widened to f32"), std::string::npos) << n1.kernel_reason;
  // A CPU without Advanced SIMD (none ships, but the probe may say so): scalar kernels, f32 KV.
  DeviceInfo bare = presets::neoverse_n1();
  bare.isa = {};
  const DevicePolicy scalar = resolve_policy(bare, F::BF16);
  EXPECT_EQ(scalar.kernel_family, "scalar");
  EXPECT_EQ(scalar.kv, F::F32);
  EXPECT_NE(scalar.kv_reason.find("no NEON"), std::string::npos) << scalar.kv_reason;
}

TEST(DtypePolicy, ResolvesOnThisMachine) {
  DevicePolicy p = resolve_policy(host_cpu(), F::BF16);
  EXPECT_FALSE(p.kernel_family.empty());
  EXPECT_TRUE(p.warnings.empty()) << describe_policy(p);
  EXPECT_EQ(p.compute, has_native_bf16(host_cpu()) ? F::BF16 : F::F32);
}

}  // namespace g4
