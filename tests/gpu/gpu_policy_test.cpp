#include "gpu/gpu_policy.h"

#include <gtest/gtest.h>

#include "gpu/gpu_presets.h"
#include "platform/error.h"

namespace g4::gpu {
namespace {

struct Profile {
  const char* name;
  VulkanDeviceInfo device;
  bool native_bf16;
};

std::vector<Profile> profiles() {
  return {{"lavapipe", presets::lavapipe(), false},
          {"T4", presets::tesla_t4(), false},
          {"L4", presets::nvidia_l4(), true},
          {"H100", presets::nvidia_h100(), true}};
}

// A build whose shaders could multiply bf16, so the device half of the rule decides.
const ShaderSet kWithBf16Shaders{true, true};

}  // namespace

TEST(GpuPolicy, NoProfileWithoutNativeBf16GetsBf16Compute) {
  for (const Profile& p : profiles()) {
    for (NumFormat ckpt : {NumFormat::F32, NumFormat::F16, NumFormat::BF16, NumFormat::Q8, NumFormat::Q4}) {
      const GpuPolicy policy = resolve_gpu_policy(p.device, ckpt, std::nullopt, kWithBf16Shaders);
      if (!p.native_bf16) {
        EXPECT_NE(policy.compute, NumFormat::BF16) << p.name << " " << num_format_name(ckpt);
      }
    }
    // The positive side, so the rule above is not vacuous: bf16 checkpoints on bf16 devices do get it.
    const GpuPolicy bf16 = resolve_gpu_policy(p.device, NumFormat::BF16, std::nullopt, kWithBf16Shaders);
    EXPECT_EQ(bf16.compute == NumFormat::BF16, p.native_bf16) << p.name << ": " << bf16.compute_reason;
  }
}

TEST(GpuPolicy, RequestedBf16IsRefusedWithoutNativeBf16) {
  for (const Profile& p : profiles()) {
    if (p.native_bf16) {
      EXPECT_EQ(resolve_gpu_policy(p.device, NumFormat::BF16, NumFormat::BF16, kWithBf16Shaders).compute,
                NumFormat::BF16);
      continue;
    }
    try {
      resolve_gpu_policy(p.device, NumFormat::BF16, NumFormat::BF16, kWithBf16Shaders);
      ADD_FAILURE() << p.name << " accepted --compute bf16";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not report bf16 arithmetic"), std::string::npos) << e.what();
    }
  }
}

TEST(GpuPolicy, ThisBuildHasNoBf16ShaderSoEvenL4ComputesF32) {
  const GpuPolicy p = resolve_gpu_policy(presets::nvidia_l4(), NumFormat::BF16);
  EXPECT_EQ(p.compute, NumFormat::F32);
  EXPECT_NE(p.compute_reason.find("glslc"), std::string::npos) << p.compute_reason;
  EXPECT_THROW(resolve_gpu_policy(presets::nvidia_l4(), NumFormat::BF16, NumFormat::BF16), Error);
}

TEST(GpuPolicy, Bf16WeightsStaySixteenBitAndAreWidenedInTheShader) {
  for (const Profile& p : profiles()) {
    const GpuPolicy policy = resolve_gpu_policy(p.device, NumFormat::BF16);
    EXPECT_EQ(policy.weights, NumFormat::BF16) << p.name;
    EXPECT_TRUE(policy.widened_in_shader) << p.name;
    EXPECT_NE(policy.weights_reason.find("widened to f32 in the shader"), std::string::npos) << policy.weights_reason;
  }
}

// f16 compute only on request, only where the device reports shaderFloat16 and 16-bit storage,
// and only in a build with the f16-product shaders (G4_VULKAN builds have them: the device tests
// check built_shaders()). Each refusal names what was missing.
TEST(GpuPolicy, F16ComputeNeedsShaderFloat16) {
  const ShaderSet with_f16{false, true}, without_f16{false, false};
  const GpuPolicy granted = resolve_gpu_policy(presets::lavapipe(), NumFormat::F16, NumFormat::F16, with_f16);
  EXPECT_EQ(granted.compute, NumFormat::F16);
  EXPECT_NE(granted.compute_reason.find("multiply in f16 and sum in f32"), std::string::npos) << granted.compute_reason;
  // Any checkpoint: the products round their operands to f16 whatever the weights' format.
  EXPECT_EQ(resolve_gpu_policy(presets::lavapipe(), NumFormat::Q4, NumFormat::F16, with_f16).compute, NumFormat::F16);
  auto expect_refused = [](const VulkanDeviceInfo& d, const ShaderSet& shaders, const std::string& names) {
    try {
      resolve_gpu_policy(d, NumFormat::F32, NumFormat::F16, shaders);
      ADD_FAILURE() << d.name << ": --compute f16 granted, expected a refusal naming " << names;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--compute f16 refused"), std::string::npos) << e.what();
    }
  };
  expect_refused(presets::lavapipe(), without_f16, "no f16-arithmetic shader");
  VulkanDeviceInfo no_f16 = presets::lavapipe();
  no_f16.shader_float16 = false;
  expect_refused(no_f16, with_f16, "shaderFloat16");
  VulkanDeviceInfo no_storage = presets::lavapipe();
  no_storage.storage_16bit = false;
  expect_refused(no_storage, with_f16, "storageBuffer16BitAccess");
  // Without a request every profile computes in f32, f16 shaders or not, and f16 checkpoints keep
  // their 16-bit storage.
  for (const Profile& p : profiles())
    for (const NumFormat ckpt : {NumFormat::F32, NumFormat::F16, NumFormat::Q8})
      EXPECT_EQ(resolve_gpu_policy(p.device, ckpt, std::nullopt, with_f16).compute, NumFormat::F32) << p.name;
  const GpuPolicy by_default = resolve_gpu_policy(no_f16, NumFormat::F16);
  EXPECT_EQ(by_default.compute, NumFormat::F32);
  EXPECT_EQ(by_default.weights, NumFormat::F16);
}

TEST(GpuPolicy, F16WeightsWithoutSixteenBitStorageAreWidenedAtLoad) {
  VulkanDeviceInfo d = presets::lavapipe();
  d.storage_16bit = false;
  const GpuPolicy p = resolve_gpu_policy(d, NumFormat::F16);
  EXPECT_EQ(p.weights, NumFormat::F32);
  EXPECT_NE(p.weights_reason.find("2x memory"), std::string::npos) << p.weights_reason;
}

TEST(GpuPolicy, QuantizedComputeIsRefused) {
  EXPECT_THROW(resolve_gpu_policy(presets::nvidia_h100(), NumFormat::Q8, NumFormat::Q8), Error);
}

TEST(GpuPolicy, UnknownBf16CountsAsAbsent) {
  VulkanDeviceInfo d = presets::nvidia_l4();
  d.bf16 = Support::Unknown;  // the extension listed, the headers too old to ask its features
  EXPECT_EQ(resolve_gpu_policy(d, NumFormat::BF16, std::nullopt, kWithBf16Shaders).compute, NumFormat::F32);
}

}  // namespace g4::gpu
