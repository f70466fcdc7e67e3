// The software tile model (tile_model.h) against the SDM's definitions, computed here element
// by element: the kernels' tests on CPUs without AMX are only as good as this model.
#include "ops/amx/tile_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "platform/error.h"

namespace g4 {
namespace {

// TDPBSUD: C[m][n] += Σ_k Σ_i int8(A[m][4k + i]) · uint8(B[k][4n + i]), exact, for every byte
// value (the extremes -128 and 255 included) and partial shapes (5 rows, K = 12 bytes).
TEST(TileRegisterModel, DpbsudIsTheSignedUnsignedQuadSum) {
  std::mt19937 rng(5);
  for (int M : {16, 5})
    for (int K : {64, 32, 12}) {
      TileConfig c;
      c.set(0, M, 64);      // sums: M x 16 int32
      c.set(1, M, K);       // A: M rows of K signed bytes
      c.set(2, K / 4, 64);  // B: K/4 rows of 16 unsigned quads
      ops::TileRegisterModel u;
      u.configure(c);
      int8_t a[16][64];
      uint8_t b[16][64];
      int32_t start[16][16], got[16][16];
      for (auto& r : a)
        for (auto& v : r) v = int8_t(rng() & 0xFF);
      for (auto& r : b)
        for (auto& v : r) v = uint8_t(rng() & 0xFF);
      a[0][0] = -128, b[0][0] = 255;
      for (auto& r : start)
        for (auto& v : r) v = int32_t(rng() % 2000001) - 1000000;
      u.load(0, start, 64);
      u.load(1, a, 64);
      u.load(2, b, 64);
      u.dpbsud(0, 1, 2);
      u.store(0, got, 64);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < 16; ++n) {
          int64_t want = start[m][n];
          for (int k = 0; k < K; ++k) want += int64_t(a[m][k]) * b[k / 4][4 * n + k % 4];
          ASSERT_EQ(got[m][n], want) << "M " << M << " K " << K << " m " << m << " n " << n;
        }
    }
}

TEST(TileRegisterModel, RefusesTilesThatDoNotChainOrAreNotConfigured) {
  TileConfig c;
  c.set(0, 16, 64);
  c.set(1, 16, 32);
  c.set(2, 16, 64);  // B should have 32 / 4 = 8 rows
  ops::TileRegisterModel u;
  u.configure(c);
  EXPECT_THROW(u.dpbsud(0, 1, 2), Error);
  EXPECT_THROW(u.dpbf16ps(0, 1, 2), Error);
  EXPECT_THROW(u.zero(5), Error);  // unconfigured
  c.set(2, 8, 64);
  u.configure(c);
  EXPECT_NO_THROW(u.dpbsud(0, 1, 2));
}

}  // namespace
}  // namespace g4
