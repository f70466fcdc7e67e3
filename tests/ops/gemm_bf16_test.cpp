// The AVX512_BF16 product (VDPBF16PS) and the AMX-BF16 tile product (TDPBF16PS, here on the
// software model of the tiles where the CPU has none) against the reference loop on the same
// bf16-rounded activations, and their invariance: a token's outputs are bit-identical whatever
// the batch, the token offset, the row range or the thread count (so batching/chunking cannot
// change them).
#include "ops/matmul/gemm_bf16.h"
#include "ops/amx/gemm_bf16_tiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/matmul/matmul.h"
#include "ops/matmul_context_options.h"
#include "ops/ref/reference_ops.h"
#include "platform/device_presets.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/row_interleave.h"
#include "platform/tensor_view.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

struct Bf16Weights {
  std::vector<uint16_t> bits;
  TensorView view;
};

Bf16Weights make_weights(int64_t out, int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Bf16Weights w;
  w.bits.resize(size_t(out * in));
  for (auto& b : w.bits) b = f32_to_bf16(u(rng));
  w.view = test::matrix_view(DType::BF16, out, in, w.bits.data());
  return w;
}

class GemmBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::gemm_bf16_available()) GTEST_SKIP() << "this CPU has no confirmed AVX512_BF16 (probe + self-test)";
  }
};

TEST_F(GemmBf16, RoundingMatchesScalarRoundToNearestEven) {
  std::vector<float> x = test::random_activations(1000, 1);
  x[3] = 1.00390625f;  // exactly halfway between two bf16 values: ties to even
  x[4] = -0.0f;
  x[5] = 3.0e38f;
  for (int64_t n : {1, 15, 16, 17, 1000}) {
    std::vector<uint16_t> got(static_cast<size_t>(n), 0xdead);
    ops::round_rows_to_bf16(x.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], f32_to_bf16(x[size_t(i)])) << "n " << n << " i " << i;
  }
}

// ops::matmul on `w` (on the calling thread, 2 and 3 threads) against ref::matmul on the same
// bf16-rounded activations over the row-major `rows`: exact products of bf16 pairs summed in f32
// in another order, so each output within rel · Σ|x·w|.
void expect_near_reference(const Bf16Weights& rows, const Bf16Weights& w, double rel,
                           ops::Bf16Tiles tiles = ops::Bf16Tiles::None) {
  const int64_t out = rows.view.shape[0], in = rows.view.shape[1];
  ThreadPool pool2(2), pool3(3);
  for (int64_t T : {1, 3, 4, 5, 8, 9, 70}) {
    std::vector<float> x = test::random_activations(T * in, unsigned(T + in));
    std::vector<float> xr(x.size()), want(size_t(T * out)), got(size_t(T * out));
    for (size_t i = 0; i < x.size(); ++i) xr[i] = round_to_bf16(x[i]);
    ref::matmul(xr.data(), T, rows.view, want.data());
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      ops::MatmulContext ctx{.pool = p, .panel_rows = 4, .bf16_compute = true};
      ctx.bf16_tiles = tiles;
      ASSERT_TRUE(ops::uses_bf16_kernel(ctx));
      std::fill(got.begin(), got.end(), NAN);
      ops::matmul(x.data(), T, w.view, got.data(), ctx);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) {
          double mag = 0;
          for (int64_t i = 0; i < in; ++i) mag += std::fabs(double(xr[size_t(t * in + i)]) * rows.view.at(o * in + i));
          const size_t k = size_t(t * out + o);
          ASSERT_NEAR(got[k], want[k], rel * mag + 1e-30) << "out " << out << " in " << in << " T " << T << " t " << t
                                                         << " o " << o;
        }
    }
  }
}

TEST_F(GemmBf16, MatchesReferenceOnRoundedActivations) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{1, 1}, {7, 45}, {67, 33}, {130, 256}, {64, 1000}, {9, 64}}) {
    const Bf16Weights w = make_weights(out, in, unsigned(out * 7 + in));
    expect_near_reference(w, w, 1e-6);
  }
}

TEST_F(GemmBf16, TokenResultsDoNotDependOnBatchOffsetRowsOrThreads) {
  const int64_t out = 37, in = 300, T = 70;
  Bf16Weights w = make_weights(out, in, 5);
  std::vector<float> x = test::random_activations(T * in, 9);
  std::vector<float> all(size_t(T * out));
  ops::matmul(x.data(), T, w.view, all.data(),
              ops::MatmulContext{.pool = nullptr, .panel_rows = 4, .bf16_compute = true});
  ThreadPool pool(2);
  for (int64_t t : {0, 1, 3, 63, 64, 69}) {
    // Alone (T = 1), on 2 threads.
    std::vector<float> one(static_cast<size_t>(out));
    ops::matmul(&x[size_t(t * in)], 1, w.view, one.data(),
                ops::MatmulContext{.pool = &pool, .panel_rows = 4, .bf16_compute = true});
    EXPECT_EQ(0, std::memcmp(one.data(), &all[size_t(t * out)], size_t(out) * 4)) << "token " << t << " alone";
    // In a chunk of 3 starting at t (a different tile position), rows from an odd offset.
    if (t + 3 <= T) {
      std::vector<uint16_t> xb(size_t(3 * in));
      ops::round_rows_to_bf16(&x[size_t(t * in)], 3 * in, xb.data());
      std::vector<float> part(size_t(3 * out), NAN);
      ops::gemm_bf16_rows(xb.data(), 3, in, w.bits.data(), 5, out, part.data(), out);
      ops::gemm_bf16_rows(xb.data(), 3, in, w.bits.data(), 0, 5, part.data(), out);
      EXPECT_EQ(0, std::memcmp(part.data(), &all[size_t(t * out)], size_t(3 * out) * 4)) << "chunk at " << t;
    }
  }
}

// The same weights as BF16_R16 (16-row groups interleaved), as model/weight_interleave does at load.
Bf16Weights interleaved(const Bf16Weights& w) {
  Bf16Weights r = w;
  const int64_t out = w.view.shape[0], in = w.view.shape[1];
  const auto* rows = reinterpret_cast<const std::byte*>(w.bits.data());
  auto* groups = reinterpret_cast<std::byte*>(r.bits.data());
  const uint64_t group_bytes = uint64_t(kInterleaveRows * in) * 2;
  for (int64_t g = 0; g < out / kInterleaveRows; ++g)
    interleave_group(DType::BF16, rows + g * group_bytes, in, groups + g * group_bytes);
  r.view = test::matrix_view(DType::BF16_R16, out, in, r.bits.data());
  return r;
}

// One f32 chain over in/2 pairs: the bound grows with the chain's length.
TEST_F(GemmBf16, InterleavedMatchesReferenceOnRoundedActivations) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{16, 2}, {48, 46}, {64, 300}, {160, 1536}}) {
    const Bf16Weights rows = make_weights(out, in, unsigned(out * 7 + in));
    expect_near_reference(rows, interleaved(rows), 1.2e-7 * double(in));
  }
  EXPECT_NE(
      ops::describe_matmul(ops::MatmulContext{.pool = nullptr, .panel_rows = 4, .bf16_compute = true}, DType::BF16_R16)
          .find("16 rows interleaved"),
      std::string::npos);
}

// One chain per row and token: a token's outputs are the same bits alone (decode, any number of
// groups side by side), anywhere in a batch (prefill panels of 8, a last short panel), for any
// row range and any thread split.
TEST_F(GemmBf16, InterleavedTokenResultsDoNotDependOnBatchRowsStreamsOrThreads) {
  const int64_t out = 112, in = 202, T = 70;  // 7 groups: pairs and a last group alone
  const Bf16Weights w = interleaved(make_weights(out, in, 6));
  std::vector<float> x = test::random_activations(T * in, 10);
  std::vector<uint16_t> xb(x.size());
  ops::round_rows_to_bf16(x.data(), int64_t(x.size()), xb.data());
  std::vector<float> all(size_t(T * out), NAN);
  ops::gemm_bf16_interleaved_rows(xb.data(), T, in, w.view.data, 0, out, all.data(), out, 2);
  ThreadPool pool(2);
  std::vector<float> threaded(all.size(), NAN);
  ops::matmul(x.data(), T, w.view, threaded.data(),
              ops::MatmulContext{.pool = &pool, .panel_rows = 4, .bf16_compute = true});
  EXPECT_EQ(0, std::memcmp(threaded.data(), all.data(), all.size() * 4)) << "2 threads";
  for (int64_t t : {0, 1, 7, 8, 63, 64, 69})
    for (int side : {1, 2, 4})
      for (uint64_t prefetch : {uint64_t(0), uint64_t(256), uint64_t(4096)}) {  // past group ends and the matrix
        std::vector<float> one(static_cast<size_t>(out), NAN);
        ops::gemm_bf16_interleaved_rows(&xb[size_t(t * in)], 1, in, w.view.data, 0, out, one.data(), out, side, prefetch);
        EXPECT_EQ(0, std::memcmp(one.data(), &all[size_t(t * out)], size_t(out) * 4))
            << "token " << t << " alone, " << side << " side by side, prefetch " << prefetch;
      }
  // Tokens 5..14 (panels at other offsets, the last one short), rows in two ranges.
  std::vector<float> part(size_t(10 * out), NAN);
  ops::gemm_bf16_interleaved_rows(&xb[size_t(5 * in)], 10, in, w.view.data, 48, out, part.data(), out, 2);
  ops::gemm_bf16_interleaved_rows(&xb[size_t(5 * in)], 10, in, w.view.data, 0, 48, part.data(), out, 2);
  EXPECT_EQ(0, std::memcmp(part.data(), &all[size_t(5 * out)], part.size() * 4));
  EXPECT_THROW(ops::gemm_bf16_interleaved_rows(xb.data(), 1, in, w.view.data, 0, 40, part.data(), out, 2), Error);
  EXPECT_THROW(ops::gemm_bf16_interleaved_rows(xb.data(), 1, 201, w.view.data, 0, 16, part.data(), out, 2), Error);
}

// ---- The tile kernel (gemm_bf16_tiles.h), on the software model of AMX-BF16 where the CPU has none.

// Scalar bf16 activations, so these run on any CPU (the model needs no AVX-512).
std::vector<uint16_t> bf16_activations(int64_t T, int64_t in, unsigned seed) {
  const std::vector<float> x = test::random_activations(T * in, seed);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  return xb;
}

// Tokens [t0, t0 + n) of row-major bf16 activations [*, in] as a batch of their own, in the
// tiles' panel layout.
std::vector<uint16_t> panels(const std::vector<uint16_t>& xb, int64_t t0, int64_t n, int64_t in) {
  std::vector<uint16_t> p(size_t(ops::bf16_tile_panel_elements(n, in)));
  ops::pack_bf16_tile_panels(&xb[size_t(t0 * in)], n, in, p.data());
  return p;
}

// The tile unit under test: the CPU's when its kernel check passed, else the software model.
ops::Bf16Tiles tile_unit() { return ops::amx_bf16_kernel_usable() ? ops::Bf16Tiles::Amx : ops::Bf16Tiles::Emulated; }

// Each output against the double sum of the same bf16 products, within one f32 rounding per
// column (the sums run over the columns in order); rows outside [o_begin, o_end) untouched.
TEST(Bf16Tiles, MatchTheScalarSumForEveryTileShape) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {80, 320}}) {
    const Bf16Weights rows = make_weights(out, in, unsigned(out + in));
    const Bf16Weights w = interleaved(rows);
    for (int64_t T : {1, 2, 15, 16, 17, 32, 33, 70}) {  // token tiles full, partial, one or two per panel
      const std::vector<uint16_t> xb = bf16_activations(T, in, unsigned(T * 3 + in));
      const int64_t o_begin = out > 16 ? 16 : 0;  // rows from the second group on, when there is one
      std::vector<float> y(size_t(T * out), NAN);
      ops::gemm_bf16_tiles(tile_unit(), panels(xb, 0, T, in).data(), T, in, w.view.data, o_begin, out, y.data(), out);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) {
          const float got = y[size_t(t * out + o)];
          if (o < o_begin) {
            ASSERT_TRUE(std::isnan(got)) << "row " << o << " outside the range was written";
            continue;
          }
          double sum = 0, mag = 0;
          for (int64_t i = 0; i < in; ++i) {
            const double p = double(bf16_to_f32(xb[size_t(t * in + i)])) * double(bf16_to_f32(rows.bits[size_t(o * in + i)]));
            sum += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(got, sum, double(in) * 0x1p-24 * mag) << "out " << out << " in " << in << " T " << T << " t " << t
                                                            << " o " << o;
        }
    }
  }
}

// Small integers: every product and partial sum is exact in f32, so the tiles must give the
// integer dot product exactly (a misplaced pair or row shows as a wrong integer, not rounding).
TEST(Bf16Tiles, ExactOnSmallIntegers) {
  const int64_t out = 32, in = 64, T = 20;
  Bf16Weights rows;
  rows.bits.resize(size_t(out * in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) rows.bits[size_t(o * in + i)] = f32_to_bf16(float((o * 5 + i * 3) % 7 - 3));
  rows.view = test::matrix_view(DType::BF16, out, in, rows.bits.data());
  const Bf16Weights w = interleaved(rows);
  std::vector<uint16_t> xb(size_t(T * in));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < in; ++i) xb[size_t(t * in + i)] = f32_to_bf16(float((t * 3 + i * 7) % 9 - 4));
  std::vector<float> y(size_t(T * out), NAN);
  ops::gemm_bf16_tiles(tile_unit(), panels(xb, 0, T, in).data(), T, in, w.view.data, 0, out, y.data(), out);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      int64_t want = 0;
      for (int64_t i = 0; i < in; ++i) want += ((t * 3 + i * 7) % 9 - 4) * ((o * 5 + i * 3) % 7 - 3);
      ASSERT_EQ(y[size_t(t * out + o)], float(want)) << "t " << t << " o " << o;
    }
}

// Each sum depends on its token's row and its weight row only: a token alone (decode), in a
// chunk at another offset (other tile positions, partial tiles) and over split row ranges gives
// the same bits as in the full batch.
TEST(Bf16Tiles, TokenResultsDoNotDependOnBatchOrRows) {
  const int64_t out = 112, in = 128, T = 70;  // 7 groups: pairs and a last one alone
  const Bf16Weights w = interleaved(make_weights(out, in, 8));
  const std::vector<uint16_t> xb = bf16_activations(T, in, 12);
  const ops::Bf16Tiles unit = tile_unit();
  std::vector<float> all(size_t(T * out), NAN);
  ops::gemm_bf16_tiles(unit, panels(xb, 0, T, in).data(), T, in, w.view.data, 0, out, all.data(), out);
  for (int64_t t : {0, 1, 15, 16, 31, 32, 63, 64, 69}) {
    std::vector<float> one(size_t(out), NAN);
    ops::gemm_bf16_tiles(unit, panels(xb, t, 1, in).data(), 1, in, w.view.data, 0, out, one.data(), out);
    EXPECT_EQ(0, std::memcmp(one.data(), &all[size_t(t * out)], one.size() * 4)) << "token " << t << " alone";
  }
  std::vector<float> part(size_t(21 * out), NAN);
  ops::gemm_bf16_tiles(unit, panels(xb, 7, 21, in).data(), 21, in, w.view.data, 48, out, part.data(), out);
  ops::gemm_bf16_tiles(unit, panels(xb, 7, 21, in).data(), 21, in, w.view.data, 0, 48, part.data(), out);
  EXPECT_EQ(0, std::memcmp(part.data(), &all[size_t(7 * out)], part.size() * 4)) << "tokens 7..27, rows in two ranges";
  // The token block and the column chunks re-order the walk, not a sum: a chunk after the first
  // carries the sums on through y (chunks of 1, 2 and 3 steps of the 4, one uneven).
  for (int64_t block : {32, 96, 512})
    for (int64_t chunk : {0, 32, 64, 96}) {
      std::vector<float> blocked(all.size(), NAN);
      ops::gemm_bf16_tiles(unit, panels(xb, 0, T, in).data(), T, in, w.view.data, 0, out, blocked.data(), out,
                           {block, chunk});
      EXPECT_EQ(0, std::memcmp(blocked.data(), all.data(), all.size() * 4)) << "token block " << block << ", chunk " << chunk;
    }
}

// The tile panel layout, element by element from its stated formula: token t, column i at
// ((t / 32 · in / 32 + i / 32) · 32 + t % 32) · 32 + i % 32, each the value rounded to nearest
// even; token ranges rounded apart land where one call puts them; a last panel's missing tokens
// are left alone; widths that are not whole steps are refused.
TEST(Bf16Tiles, PanelsHoldEachRoundedValueWhereTheLayoutSays) {
  const int64_t T = 37, in = 96;
  const std::vector<float> x = test::random_activations(T * in, 77);
  const int64_t n = ops::bf16_tile_panel_elements(T, in);
  ASSERT_EQ(n, 64 * in);
  std::vector<uint16_t> p(size_t(n), 0xFFFF);
  ops::round_to_bf16_tile_panels(x.data(), 0, 20, in, p.data());
  ops::round_to_bf16_tile_panels(x.data(), 20, T, in, p.data());
  std::vector<bool> written(size_t(n), false);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < in; ++i) {
      const size_t at = size_t(((t / 32 * (in / 32) + i / 32) * 32 + t % 32) * 32 + i % 32);
      ASSERT_EQ(p[at], f32_to_bf16(x[size_t(t * in + i)])) << "token " << t << " column " << i;
      written[at] = true;
    }
  for (int64_t k = 0; k < n; ++k)
    if (!written[size_t(k)]) {
      ASSERT_EQ(p[size_t(k)], 0xFFFF) << "element " << k << " belongs to no token";
    }
  EXPECT_THROW(ops::round_to_bf16_tile_panels(x.data(), 0, 1, 48, p.data()), Error);
  // Values already bf16 land in the same places.
  std::vector<uint16_t> xb(x.size()), packed(size_t(n), 0xFFFF);
  for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  ops::pack_bf16_tile_panels(xb.data(), T, in, packed.data());
  EXPECT_EQ(packed, p);
  EXPECT_THROW(ops::pack_bf16_tile_panels(xb.data(), 1, 48, packed.data()), Error);
}

// Blocking: column chunks of equal whole steps whose pair of row groups (64 bytes a column) takes
// at most an eighth of the budget; token blocks of as many 32-token panels as fit the rest beside
// the chunk, 1 to 16.
TEST(Bf16Tiles, BlockingFitsItsBudget) {
  auto is = [](ops::Bf16TileBlocking b, int64_t tokens, int64_t columns) {
    return b.token_block == tokens && b.k_chunk == columns;
  };
  // 1 MiB (half a 2 MiB L2): in = 1536 whole (the pair 96 KiB), 9 panels of 3 KiB rows beside it.
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(1536, 1u << 20), 288, 1536));
  // E2B's down_proj, 12288 wide: 6 chunks of 2048 (the pair's chunk 128 KiB), 7 panels of 4 KiB
  // rows; whole, the pair alone (768 KiB) left room for 1 panel.
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(12288, 1u << 20), 224, 2048));
  // 512 KiB: 1536 in 2 chunks of 768 (48 KiB), 9 panels; 6144 in 6 of 1024 (64 KiB), 7 panels.
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(1536, 512u << 10), 288, 768));
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(6144, 512u << 10), 224, 1024));
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(256, 1u << 30), 512, 256));  // at most 16 panels
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(1536, 0), 32, 1536));        // no budget: one panel, all columns
  EXPECT_TRUE(is(ops::bf16_tiles_blocking(96, 8u << 10), 96, 32));  // 8 KiB: chunks of one step (2 KiB), 3 panels
}

TEST(Bf16Tiles, RefuseShapesTheTilesDoNotTake) {
  const Bf16Weights w = interleaved(make_weights(32, 64, 3));
  const std::vector<uint16_t> xb = bf16_activations(2, 64, 4);
  std::vector<float> y(64);
  EXPECT_FALSE(ops::bf16_tiles_fit(48));
  EXPECT_FALSE(ops::bf16_tiles_fit(0));
  EXPECT_TRUE(ops::bf16_tiles_fit(1536));
  EXPECT_THROW(ops::gemm_bf16_tiles(ops::Bf16Tiles::Emulated, xb.data(), 2, 48, w.view.data, 0, 16, y.data(), 32), Error);
  EXPECT_THROW(ops::gemm_bf16_tiles(ops::Bf16Tiles::Emulated, xb.data(), 2, 64, w.view.data, 0, 24, y.data(), 32), Error);
  EXPECT_THROW(ops::gemm_bf16_tiles(ops::Bf16Tiles::None, xb.data(), 2, 64, w.view.data, 0, 16, y.data(), 32), Error);
  EXPECT_THROW(ops::gemm_bf16_tiles(ops::Bf16Tiles::Emulated, xb.data(), 2, 64, w.view.data, 0, 16, y.data(), 32, {48, 0}),
               Error);
  EXPECT_THROW(ops::gemm_bf16_tiles(ops::Bf16Tiles::Emulated, xb.data(), 2, 64, w.view.data, 0, 16, y.data(), 32, {32, 48}),
               Error);
}

// The one-time kernel check: it passes on the software model (the same check the CPU's tiles
// must pass), and says why where it did not run on the CPU's.
TEST(Bf16Tiles, KernelCheckPassesOnTheModelAndSaysWhyTheCpuTilesAreNotUsed) {
  const ops::TileKernelCheck model = ops::check_bf16_tiles(ops::Bf16Tiles::Emulated);
  EXPECT_TRUE(model.run);
  EXPECT_TRUE(model.passed) << model.detail;
  const ops::TileKernelCheck& cpu = ops::amx_bf16_kernel_check();
  if (host_cpu().amx_bf16_usable()) {
    EXPECT_TRUE(cpu.run);
    EXPECT_TRUE(cpu.passed) << cpu.detail;
  } else {
    EXPECT_FALSE(cpu.run);
    EXPECT_FALSE(ops::amx_bf16_kernel_usable());
    EXPECT_NE(cpu.detail.find("did not confirm AMX-BF16"), std::string::npos) << cpu.detail;
    // A context made for this CPU never asks for tiles it does not have, nor one made for a
    // preset that describes AMX-BF16 (Sapphire Rapids), since this CPU runs it.
    EXPECT_EQ(test::context_for(host_cpu(), {.bf16_compute = true}).bf16_tiles, ops::Bf16Tiles::None);
    EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {.bf16_compute = true}).bf16_tiles, ops::Bf16Tiles::None);
  }
  // Never without bf16 compute, nor on a device whose AMX the OS refused or whose self-test failed.
  EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {}).bf16_tiles, ops::Bf16Tiles::None);
  EXPECT_EQ(test::context_for(presets::sapphire_rapids_amx_refused(), {.bf16_compute = true}).bf16_tiles,
            ops::Bf16Tiles::None);
  EXPECT_EQ(test::context_for(presets::sapphire_rapids_amx_selftest_failed(), {.bf16_compute = true}).bf16_tiles,
            ops::Bf16Tiles::None);
}

// Through ops::matmul (activations rounded by the AVX512_BF16 kernel, rows split over threads):
// widths in whole steps of 32 on the tiles, others on VDPBF16PS, each near the reference.
TEST_F(GemmBf16, TilesThroughMatmulMatchReference) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{16, 32}, {64, 96}, {160, 640}, {48, 46}}) {
    const Bf16Weights rows = make_weights(out, in, unsigned(out * 3 + in));
    expect_near_reference(rows, interleaved(rows), 1.2e-7 * double(in), ops::Bf16Tiles::Emulated);
  }
  ops::MatmulContext ctx{.pool = nullptr, .panel_rows = 4, .bf16_compute = true};
  ctx.bf16_tiles = ops::Bf16Tiles::Emulated;
  EXPECT_TRUE(ops::uses_bf16_tiles(ctx, 96));
  EXPECT_FALSE(ops::uses_bf16_tiles(ctx, 46));
  EXPECT_NE(ops::describe_matmul(ctx, DType::BF16_R16).find("software model of AMX-BF16 tiles"), std::string::npos);
  EXPECT_EQ(ops::mac_unit_of(ctx, DType::BF16_R16), MacUnit::Bf16Tile);
  ctx.bf16_tiles = ops::Bf16Tiles::None;
  EXPECT_EQ(ops::mac_unit_of(ctx, DType::BF16_R16), MacUnit::Bf16Dot);
}

// Threads and batch through ops::matmul on the tiles: one token alone on 2 threads equals its
// row of a 70-token batch on one thread.
TEST_F(GemmBf16, TilesThroughMatmulAreBitExactAcrossBatchAndThreads) {
  const int64_t out = 96, in = 160, T = 70;
  const Bf16Weights w = interleaved(make_weights(out, in, 21));
  const std::vector<float> x = test::random_activations(T * in, 22);
  ops::MatmulContext one_thread{.pool = nullptr, .panel_rows = 4, .bf16_compute = true};
  one_thread.bf16_tiles = ops::Bf16Tiles::Emulated;
  ThreadPool pool(2);
  ops::MatmulContext two_threads = one_thread;
  two_threads.pool = &pool;
  std::vector<float> all(size_t(T * out), NAN), threaded(size_t(T * out), NAN);
  ops::matmul(x.data(), T, w.view, all.data(), one_thread);
  ops::matmul(x.data(), T, w.view, threaded.data(), two_threads);
  EXPECT_EQ(0, std::memcmp(all.data(), threaded.data(), all.size() * 4));
  for (int64_t t : {0, 33, 69}) {
    std::vector<float> one(size_t(out), NAN);
    ops::matmul(&x[size_t(t * in)], 1, w.view, one.data(), two_threads);
    EXPECT_EQ(0, std::memcmp(one.data(), &all[size_t(t * out)], one.size() * 4)) << "token " << t;
  }
}

}  // namespace
}  // namespace g4
