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
      {"spr vnni self-test failed", vnni_failed, F::Q8, {}, F::F32, "no usable AVX512_VNNI"},
      {"avx2 laptop q8 (AVX-VNNI only)", presets::avx2_laptop(), F::Q8, {}, F::F32, "no usable AVX512_VNNI"},
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

TEST(DtypePolicy, ResolvesOnThisMachine) {
  DevicePolicy p = resolve_policy(host_cpu(), F::BF16);
  EXPECT_FALSE(p.kernel_family.empty());
  EXPECT_TRUE(p.warnings.empty()) << describe_policy(p);
  EXPECT_EQ(p.compute, has_native_bf16(host_cpu()) ? F::BF16 : F::F32);
}

}  // namespace g4
