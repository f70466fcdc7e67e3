// `g4 device --fma`: the dot-product peaks it reports are those of the instructions this CPU
// confirmed (probe and self-test), each measured (a positive rate on every usable core), in the
// JSON report and in the text, and none for an instruction the CPU lacks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "platform/device.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(DeviceCommand, FmaReportsThePeakOfEachConfirmedDotProductInstruction) {
  std::string out;
  ASSERT_EQ(0, test::g4_command("device --fma --json", &out)) << out;
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.find('{')));
  const DeviceInfo& d = host_cpu();
  std::vector<std::string> want;
  if (d.avx512_bf16_usable()) want.push_back("VDPBF16PS");
  if (d.avx512_vnni_usable()) want.push_back("VPDPBUSD");
  else if (d.avx_vnni_usable()) want.push_back("VPDPBUSD (AVX-VNNI)");
  else if (d.avx2_int8_usable()) want.push_back("VPMADDUBSW+VPMADDWD");
  if (d.amx_bf16_usable()) want.push_back("TDPBF16PS");
  if (d.amx_int8_usable()) want.push_back("TDPBSUD");
  const nlohmann::json& peaks = j.at("dot_product_peaks");
  ASSERT_EQ(peaks.size(), want.size()) << peaks.dump();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(peaks[i].at("instruction").get<std::string>(), want[i]);
    EXPECT_GT(peaks[i].at("gops").get<double>(), 0.0);
    EXPECT_EQ(peaks[i].at("threads").get<int>(), d.logical_cores);
  }
  ASSERT_EQ(0, test::g4_command("device --fma", &out)) << out;
  for (const std::string& name : want) EXPECT_NE(out.find("dot products: " + name + " peak"), std::string::npos) << out;
  ASSERT_EQ(0, test::g4_command("device", &out)) << out;
  EXPECT_EQ(out.find("dot products:"), std::string::npos) << "measured without --fma:\n" << out;
}

// The AMX-BF16 tile kernel's check is reported, in text and JSON, with its outcome on this CPU:
// run and passed where the probe confirmed AMX-BF16, otherwise not run, with the reason.
TEST(DeviceCommand, ReportsTheTileKernelCheck) {
  std::string out;
  ASSERT_EQ(0, test::g4_command("device --json", &out)) << out;
  const nlohmann::json check = nlohmann::json::parse(out.substr(out.find('{'))).at("amx_bf16_kernel_check");
  const bool amx = host_cpu().amx_bf16_usable();
  EXPECT_EQ(check.at("run").get<bool>(), amx) << check.dump();
  EXPECT_EQ(check.at("passed").get<bool>(), amx) << check.dump();
  EXPECT_FALSE(check.at("detail").get<std::string>().empty());
  ASSERT_EQ(0, test::g4_command("device", &out)) << out;
  EXPECT_NE(out.find(amx ? "kernel check amx-bf16 tiles: passed" : "kernel check amx-bf16 tiles: not run"), std::string::npos)
      << out;
}

// Vulkan devices are listed beside the CPU (lavapipe where mesa-vulkan-drivers is installed),
// each with its tile plan and GPU policy, or the report says in one line why there is none.
TEST(DeviceCommand, ListsVulkanDevicesOrSaysWhyNone) {
  std::string out;
  ASSERT_EQ(0, test::g4_command("device --json --checkpoint bf16", &out)) << out;
  const nlohmann::json vk = nlohmann::json::parse(out.substr(out.find('{'))).at("vulkan");
  const std::string state = vk.at("state").get<std::string>();
  EXPECT_FALSE(vk.at("message").get<std::string>().empty());
  ASSERT_EQ(0, test::g4_command("device --checkpoint bf16", &out)) << out;
  EXPECT_NE(out.find("Vulkan: " + vk.at("message").get<std::string>()), std::string::npos) << out;
  if (state != "found") {
    EXPECT_TRUE(vk.at("devices").empty());
    GTEST_SKIP() << "no Vulkan device listed: " << vk.at("message");
  }
  ASSERT_FALSE(vk.at("devices").empty());
  for (const nlohmann::json& d : vk.at("devices")) {
    EXPECT_GT(d.at("max_compute_shared_memory_bytes").get<uint64_t>(), 0u) << d.dump();
    EXPECT_TRUE(d.at("shader_tiles")[0].contains("tile") || d.at("shader_tiles")[0].contains("refused")) << d.dump();
    const nlohmann::json& policy = d.at("policy_by_checkpoint").at("bf16");
    if (d.at("bf16").get<std::string>() != "yes") {
      EXPECT_NE(policy.at("compute").get<std::string>(), "bf16") << d.dump();
    }
    EXPECT_EQ(policy.at("reasons").size(), 2u);
    EXPECT_NE(out.find("vulkan:" + std::to_string(d.at("index").get<int>()) + " " + d.at("name").get<std::string>()),
              std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace g4
