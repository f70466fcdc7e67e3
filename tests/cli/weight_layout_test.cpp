// Which layout the Q8_0/Q4_0 weight products run on, seen through `g4 bench`'s header: rows
// interleaved 16 at a time (Q8_0_R16 / Q4_0_R16) where the int8 kernel runs on memory g4 owns
// (--weights re-encoded, or a GGUF copied into huge pages), the checkpoint's row-major blocks
// where they are read through the mapping (never written) or the int8 kernel is off; and the same
// for BF16 weights and the bf16 kernel (BF16_R16), in bench and in generate.
#include <gtest/gtest.h>

#include <string>

#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_bf16_256.h"
#include "ops/matmul/gemm_q8.h"
#include "test_util.h"

namespace g4 {
namespace {

// `g4 bench` of `model` with `flags`: its output, checked to have run and to name `layout` weights
// in its header.
std::string bench_naming(const std::string& model, const std::string& flags, const std::string& layout) {
  int rc = 0;
  const std::string out = test::g4_quick_bench(model, flags, &rc);
  EXPECT_EQ(rc, 0) << flags << "\n" << out;
  EXPECT_NE(out.find("(" + layout + " weights"), std::string::npos) << flags << "\n" << out;
  return out;
}

TEST(WeightLayout, InterleavedWhereOwnedRowMajorWhereMapped) {
  if (!ops::gemm_q8_available()) GTEST_SKIP() << "no integer dot product: the int8 kernel and its layout are off";
  test::TempDir dir;
  const std::string hf = (dir.path() / "m").string(), gguf = (dir.path() / "m-q4.gguf").string();
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --dtype bf16 --out " + hf, &out)) << out;
  ASSERT_EQ(0, test::g4_command("quantize " + hf + " " + gguf + " --type q4_0", &out)) << out;
  out = bench_naming(hf, "--weights q8", "Q8_0_R16");
  EXPECT_NE(out.find("16 rows interleaved"), std::string::npos) << out;
  EXPECT_NE(out.find("interleave rows at load"), std::string::npos) << out;  // its time is reported
  // Named by the instructions that read what was interleaved: VPDPBUSD, and VDPBF16PS too where
  // the bf16 kernel runs, or f32 FMA where the AVX2 kernel reads BF16_R16 (tiny-e's 16-wide PLE
  // projection has no whole Q8_0 block per row, so it stays BF16).
  const std::string i8 = ops::int8_kernel_instruction();
  const std::string units = ops::gemm_bf16_available()       ? i8 + " and VDPBF16PS: "
                            : ops::gemm_bf16_256_available() ? i8 + " and f32 FMA (AVX2): "
                                                             : i8 + ": ";
  EXPECT_NE(out.find("16 at a time for " + units), std::string::npos) << out;
  bench_naming(gguf, "--weight-memory huge", "Q4_0_R16");
  out = bench_naming(gguf, "--weight-memory mapped", "Q4_0");
  EXPECT_NE(out.find("read from the mapping stay row-major"), std::string::npos) << out;
  out = bench_naming(gguf, "--weight-memory huge --compute f32", "Q4_0");
  EXPECT_EQ(out.find("interleaved"), std::string::npos) << out;
}

// VDPBF16PS reads BF16_R16 where the CPU has it; on AVX2 CPUs without AVX-512 the f32 products'
// FMA kernel (gemm_bf16_256.h), which compute f32 keeps.
TEST(WeightLayout, Bf16InterleavedWhereOwnedRowMajorWhereMappedOrF32) {
  const bool vdpbf16ps = ops::gemm_bf16_available();
  if (!vdpbf16ps && !ops::gemm_bf16_256_available())
    GTEST_SKIP() << "neither AVX512_BF16 nor AVX2 without AVX-512: no BF16_R16 kernel, BF16 stays row-major";
  const std::string unit = vdpbf16ps ? "VDPBF16PS" : "f32 FMA (AVX2)";
  test::TempDir dir;
  const std::string hf = (dir.path() / "m").string();
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --dtype bf16 --out " + hf, &out)) << out;
  out = bench_naming(hf, "--weight-memory huge", "BF16_R16");
  EXPECT_NE(out.find("for " + unit), std::string::npos) << out;
  if (!vdpbf16ps) {
    EXPECT_NE(out.find("widened to f32 in registers, f32 FMA (AVX2)"), std::string::npos) << out;
  }
  out = bench_naming(hf, "--weight-memory mapped", "BF16");
  EXPECT_NE(out.find("read from the mapping stay row-major"), std::string::npos) << out;
  out = bench_naming(hf, "--weight-memory huge --compute f32", vdpbf16ps ? "BF16" : "BF16_R16");
  if (vdpbf16ps) {
    EXPECT_EQ(out.find("interleaved"), std::string::npos) << out;
  }
  // generate takes the same layout (and says so on stderr) as bench and serve.
  ASSERT_EQ(0, test::g4_command("generate --model " + hf + " --tokens 5,6,7 -n 3 --threads 2 --weight-memory huge", &out))
      << out;
  EXPECT_NE(out.find("rows interleaved 16 at a time for " + unit), std::string::npos) << out;
}

}  // namespace
}  // namespace g4
