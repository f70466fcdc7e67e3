// SipHash-2-4 against the reference vectors of the paper's appendix (key 00..0f, message 00..n-1),
// and incremental updates equal to one pass.
#include <gtest/gtest.h>

#include <vector>

#include "platform/siphash.h"

namespace g4 {
namespace {

constexpr SipKey kPaperKey{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

TEST(SipHash, MatchesThePapersVectors) {
  std::vector<unsigned char> msg(64);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(siphash24(kPaperKey, msg.data(), 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(kPaperKey, msg.data(), 15), 0xa129ca6149be45e5ull);
}

TEST(SipHash, IncrementalEqualsOnePassAndTheKeyMatters) {
  std::vector<unsigned char> msg(1000);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<unsigned char>(i * 31 + 7);
  const uint64_t whole = siphash24(kPaperKey, msg.data(), msg.size());
  for (size_t cut : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(13), size_t(999)}) {
    SipHasher h(kPaperKey);
    h.update(msg.data(), cut);
    h.update(msg.data() + cut, msg.size() - cut);
    EXPECT_EQ(h.final(), whole) << cut;
  }
  EXPECT_NE(siphash24(SipKey{1, 2}, msg.data(), msg.size()), whole);
  EXPECT_EQ(process_sip_key().k0, process_sip_key().k0);  // one key per process
}

}  // namespace
}  // namespace g4
