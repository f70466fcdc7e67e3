// The KV cache dtype the commands run with (seen through `g4 bench`'s header line): the dtype
// policy's when --kv is absent, f32 for the reference loops, --kv when given, and a clear
// refusal naming the flag for a dtype that does not exist.
#include <gtest/gtest.h>

#include <string>

#include "platform/device.h"
#include "platform/dtype_policy.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(KvDefault, PolicyUnlessForcedF32ForTheReference) {
  test::TempDir dir;
  const std::string model = (dir.path() / "m").string();
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --dtype bf16 --out " + model, &out)) << out;
  const std::string policy_kv(num_format_name(resolve_policy(host_cpu(), NumFormat::BF16).kv));
  // The header names the weights as they sit in memory: BF16_R16 where the bf16 kernel reads
  // them interleaved (a CPU with AVX512_BF16), BF16 otherwise and for the reference loops.
  auto says = [](const std::string& s, const std::string& kv) {
    return s.find("BF16 weights, " + kv + " KV") != std::string::npos ||
           s.find("BF16_R16 weights, " + kv + " KV") != std::string::npos;
  };
  int rc = 0;
  out = test::g4_quick_bench(model, "", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(says(out, policy_kv)) << out;
  out = test::g4_quick_bench(model, "--reference", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("BF16 weights, f32 KV"), std::string::npos) << out;
  out = test::g4_quick_bench(model, "--kv int8", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(says(out, "int8")) << out;
  out = test::g4_quick_bench(model, "--kv q3", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--kv: KV cache dtype 'q3'"), std::string::npos) << out;
}

}  // namespace
}  // namespace g4
