#include "platform/isa_selftest.h"

#include <gtest/gtest.h>

#include <csignal>

#include "platform/sigill_guard.h"

namespace g4 {

TEST(SigillGuard, ReturnsTrueWhenBodyCompletes) {
  int ran = 0;
  EXPECT_TRUE(run_catching_sigill([&] { ran = 1; }));
  EXPECT_EQ(ran, 1);
}

#if defined(__x86_64__)
TEST(SigillGuard, TurnsAnIllegalInstructionIntoFalseAndRestoresTheHandler) {
  struct sigaction before {};
  sigaction(SIGILL, nullptr, &before);
  EXPECT_FALSE(run_catching_sigill([] { __asm__ volatile("ud2"); }));
  EXPECT_FALSE(run_catching_sigill([] { __asm__ volatile("ud2"); }));  // SIGILL is not left blocked
  struct sigaction after {};
  sigaction(SIGILL, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
  EXPECT_TRUE(run_catching_sigill([] {}));
}
#endif

// The self-test proper: on a CPU with confirmed AMX it must pass (the probe already ran it once).
TEST(AmxSelfTest, PassesWhereAmxIsConfirmed) {
  const DeviceInfo& d = host_cpu();
  if (!(d.isa.amx_tile && d.isa.amx_bf16 && d.os_amx_permitted))
    GTEST_SKIP() << "no AMX-BF16 with OS permission on this CPU: " << d.amx_bf16_selftest.detail;
  SelfTest bf16 = check_amx_bf16_tile_product();
  EXPECT_TRUE(bf16.passed()) << bf16.detail;
  if (d.isa.amx_int8) {
    SelfTest int8 = check_amx_int8_tile_product();
    EXPECT_TRUE(int8.passed()) << int8.detail;
  }
}

// Forced onto any CPU, the checks report instead of killing the process: this is what keeps g4
// alive where another engine's AMX path dies with SIGILL.
TEST(AmxSelfTest, ForcedOnAnyCpuNeverKillsTheProcess) {
  const DeviceInfo& d = host_cpu();
  SelfTest bf16 = check_amx_bf16_tile_product();
  SelfTest int8 = check_amx_int8_tile_product();
#if defined(__x86_64__)
  if (d.amx_bf16_usable()) {
    EXPECT_TRUE(bf16.passed()) << bf16.detail;
  } else if (!d.isa.amx_tile) {
    EXPECT_EQ(bf16.outcome, SelfTestOutcome::Failed);
    EXPECT_NE(bf16.detail.find("SIGILL"), std::string::npos) << bf16.detail;
  }
  if (!d.isa.amx_tile) { EXPECT_EQ(int8.outcome, SelfTestOutcome::Failed) << int8.detail; }
#else
  EXPECT_EQ(bf16.outcome, SelfTestOutcome::NotRun);
  (void)int8;
  (void)d;
#endif
}

// An AVX-512 extension's self-test run directly: passes where cpuid + XCR0 report the unit (and the
// probe recorded the pass), fails cleanly (SIGILL caught) where there is no AVX-512 at all.
void expect_selftest_matches_probe(bool reported, const SelfTest& direct, const SelfTest& probed) {
#if defined(__x86_64__)
  if (reported) {
    EXPECT_TRUE(direct.passed()) << direct.detail;
    EXPECT_TRUE(probed.passed()) << probed.detail;
  } else if (!host_cpu().isa.avx512f) {
    EXPECT_EQ(direct.outcome, SelfTestOutcome::Failed) << direct.detail;
  }
#else  // no x86 unit to try: the direct check and the probe both say so, by architecture
  EXPECT_FALSE(reported);
  EXPECT_EQ(direct.outcome, SelfTestOutcome::NotRun) << direct.detail;
  EXPECT_NE(direct.detail.find("not an x86-64 build"), std::string::npos) << direct.detail;
  EXPECT_EQ(probed.outcome, SelfTestOutcome::NotRun) << probed.detail;
#endif
}

TEST(Avx512Bf16SelfTest, MatchesWhatTheProbeFound) {
  const DeviceInfo& d = host_cpu();
  expect_selftest_matches_probe(d.isa.avx512_bf16, check_avx512_bf16_dot(), d.avx512_bf16_selftest);
}

TEST(Avx512VnniSelfTest, MatchesWhatTheProbeFound) {
  const DeviceInfo& d = host_cpu();
  expect_selftest_matches_probe(d.isa.avx512_vnni, check_avx512_vnni_dot(), d.avx512_vnni_selftest);
}

}  // namespace g4
