// The SIMD matmul against the reference loop, per stored dtype, for awkward shapes and pool sizes.
#include "ops/matmul/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/matmul/dot_kernels.h"
#include "ops/quant/quant_dot.h"
#include "ops/ref/reference_ops.h"
#include "platform/device_presets.h"
#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_q8.h"
#include "platform/error.h"
#include "platform/row_interleave.h"
#include "test_util.h"

namespace g4 {
namespace {

struct Weights {
  std::vector<std::byte> bytes;
  TensorView view;
};

Weights random_weights(DType dt, int64_t out, int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Weights w;
  w.bytes.resize(size_t(out * in) * dtype_size(dt));
  for (int64_t i = 0; i < out * in; ++i) {
    const float v = u(rng);
    if (dt == DType::F32) std::memcpy(&w.bytes[size_t(i) * 4], &v, 4);
    else {
      const uint16_t h = dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(&w.bytes[size_t(i) * 2], &h, 2);
    }
  }
  w.view = test::matrix_view(dt, out, in, w.bytes.data());
  return w;
}

TEST(Matmul, SimdMatchesReferenceForEveryFloatDtype) {
  std::printf("[ kernels ] dispatched target: %s\n", ops::dot_kernel_target());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (auto [out, in] : {std::pair<int64_t, int64_t>{1, 1}, {5, 17}, {67, 33}, {130, 256}, {64, 1000}}) {
      Weights w = random_weights(dt, out, in, unsigned(out * 31 + in));
      for (int64_t T : {1, 2, 3, 7, 9}) {
        std::vector<float> x(size_t(T * in)), want(size_t(T * out)), got(size_t(T * out));
        for (auto& v : x) v = u(rng);
        ref::matmul(x.data(), T, w.view, want.data());
        for (ThreadPool* p : {&pool1, &pool2, &pool3}) {
          for (int group : {1, 2, 4, 16, 64})
            for (int streams : {1, 2, 4}) {  // decode: up to 4, 8 or 8 rows per call
              ops::MatmulContext ctx{.pool = p, .panel_rows = group};
              ctx.decode = {streams, streams == 4 ? 8192u : 0u};
              std::fill(got.begin(), got.end(), NAN);
              ops::matmul(x.data(), T, w.view, got.data(), ctx);
              for (size_t i = 0; i < got.size(); ++i)
                // Same products, different summation order: f32 rounding only.
                ASSERT_NEAR(got[i], want[i], 2e-6f * float(in) + 1e-6f)
                    << dtype_name(dt) << " out " << out << " in " << in << " T " << T << " threads " << p->size();
            }
        }
      }
    }
  }
}

// Q8_0 / Q4_0 rows: the SIMD block kernels against dequantize-then-f32 (the reference loop).
TEST(Matmul, BlockQuantizedMatchesReference) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  ThreadPool pool(2);
  // Q8_0/Q4_0 on the SIMD block dots, the K-quants on the SIMD super-block dots and Q4_1 on the
  // scalar block dots, decode (T = 1, 2) and prefill (T = 5) alike: a prefilled token's outputs
  // are the token's alone, bit for bit (the f32 path without int8 activations).
  for (DType dt : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const bool k = dtype_block_size(dt) == 256;
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        k ? std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {5, 512}, {67, 256}, {130, 1024}}
          : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {5, 64}, {67, 96}, {130, 1024}};
    for (auto [out, in] : shapes) {
      std::vector<float> dense(size_t(out * in));
      for (auto& v : dense) v = u(rng);
      std::vector<std::byte> packed(size_t(out) * row_bytes(dt, in));
      for (int64_t o = 0; o < out; ++o) ops::quantize_row(dt, &dense[size_t(o * in)], &packed[size_t(o) * row_bytes(dt, in)], in);
      const TensorView w = test::matrix_view(dt, out, in, packed.data());
      for (int64_t T : {1, 2, 5}) {
        std::vector<float> x(size_t(T * in)), want(size_t(T * out)), got(size_t(T * out));
        for (auto& v : x) v = u(rng);
        // Independent truth: dequantize each row, then a plain double-precision dot.
        for (int64_t o = 0; o < out; ++o) {
          std::vector<float> row(static_cast<size_t>(in));
          dequantize_row(dt, &packed[size_t(o) * row_bytes(dt, in)], row.data(), in);
          for (int64_t t = 0; t < T; ++t) {
            double acc = 0;
            for (int64_t i = 0; i < in; ++i) acc += double(row[size_t(i)]) * double(x[size_t(t * in + i)]);
            want[size_t(t * out + o)] = float(acc);
          }
        }
        ops::MatmulContext ctx{.pool = &pool, .panel_rows = 4};
        std::fill(got.begin(), got.end(), std::nanf(""));  // an output left unwritten fails
        ops::matmul(x.data(), T, w, got.data(), ctx);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-6f * float(in) + 1e-5f) << dtype_name(dt) << " " << out << "x" << in << " T " << T;
        for (int64_t t = 0; t < T && T > 1; ++t) {
          std::vector<float> alone(static_cast<size_t>(out));
          ops::matmul(&x[size_t(t * in)], 1, w, alone.data(), ctx);
          ASSERT_EQ(0, std::memcmp(alone.data(), &got[size_t(t * out)], size_t(out) * sizeof(float)))
              << dtype_name(dt) << " " << out << "x" << in << " T " << T << ": token " << t << " batched differs from alone";
        }
        if (!k && dt != DType::Q4_1) continue;
        EXPECT_EQ(ops::describe_matmul(ctx, dt).find("reference loops"), std::string::npos) << ops::describe_matmul(ctx, dt);
      }
    }
  }
}

// Several products of one input in one hand-off (q, k, v; gate, up) equal separate matmul
// calls bit for bit, on every fast kernel, for decode and prefill, 1 to 3 threads; a set that
// mixes kernels falls back to separate calls. Outputs start as NaN, so a row left unwritten fails.
TEST(Matmul, SharedInputEqualsSeparateProductsBitForBit) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t in = 96;
  auto make = [&](DType dt, int64_t out) {
    const DType base = dtype_is_interleaved(dt) ? interleave_base(dt) : dt;
    Weights w;
    w.bytes.resize(size_t(out) * row_bytes(base, in));
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t o = 0; o < out; ++o) {
      for (auto& v : row) v = u(rng);
      std::byte* dst = &w.bytes[size_t(o) * row_bytes(base, in)];
      if (base == DType::BF16)
        for (int64_t i = 0; i < in; ++i) {
          const uint16_t h = f32_to_bf16(row[size_t(i)]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      else
        ops::quantize_row(base, row.data(), dst, in);
    }
    if (dtype_is_interleaved(dt)) {
      const uint64_t gb = row_bytes(base, in) * kInterleaveRows;
      std::vector<std::byte> rows(gb);
      for (int64_t g = 0; g < out / kInterleaveRows; ++g) {
        std::memcpy(rows.data(), &w.bytes[size_t(g) * gb], gb);
        interleave_group(base, rows.data(), in, &w.bytes[size_t(g) * gb]);
      }
    }
    w.view = test::matrix_view(dt, out, in, w.bytes.data());
    return w;
  };
  struct Set {
    std::vector<DType> types;
    bool bf16_compute = false, int8_activations = false;
  };
  std::vector<Set> sets{
      {.types = {DType::F32, DType::F32}},
      {.types = {DType::Q8_0, DType::BF16, DType::Q8_0}, .bf16_compute = true, .int8_activations = true}};
  if (ops::gemm_bf16_available())
    sets.push_back({.types = {DType::BF16, DType::BF16, DType::BF16}, .bf16_compute = true});
  if (ops::gemm_q8_available()) {
    sets.push_back({.types = {DType::Q8_0, DType::Q8_0, DType::Q8_0}, .int8_activations = true});
    sets.push_back({.types = {DType::Q4_0, DType::Q4_0}, .int8_activations = true});
    sets.push_back({.types = {DType::Q8_0_R16, DType::Q8_0_R16, DType::Q8_0_R16}, .int8_activations = true});
    sets.push_back({.types = {DType::Q4_0_R16, DType::Q4_0_R16}, .int8_activations = true});
  }
  for (const Set& set : sets) {
    std::vector<Weights> ws;
    for (size_t i = 0; i < set.types.size(); ++i) ws.push_back(make(set.types[i], i == 0 ? 128 : 32 + 16 * int64_t(i)));
    for (int threads : {1, 2, 3})
      for (int64_t T : {1, 6}) {
        ThreadPool pool(threads);
        ops::MatmulContext ctx{
            .pool = &pool, .panel_rows = 4, .bf16_compute = set.bf16_compute, .int8_activations = set.int8_activations};
        std::vector<float> x(size_t(T * in));
        for (auto& v : x) v = u(rng);
        std::vector<std::vector<float>> apart, together;
        std::vector<ops::Product> products;
        for (const Weights& w : ws) {
          apart.emplace_back(size_t(T * w.view.shape[0]), std::nanf(""));
          together.emplace_back(size_t(T * w.view.shape[0]), std::nanf(""));
          ops::matmul(x.data(), T, w.view, apart.back().data(), ctx);
        }
        for (size_t i = 0; i < ws.size(); ++i) products.push_back({&ws[i].view, together[i].data()});
        ops::matmul_shared_input(x.data(), T, products, ctx);
        for (size_t i = 0; i < ws.size(); ++i) {
          SCOPED_TRACE(std::string(dtype_name(set.types[i])) + " product " + std::to_string(i) + ", T " +
                       std::to_string(T) + ", " + std::to_string(threads) + " threads");
          for (float v : apart[i]) ASSERT_FALSE(std::isnan(v));
          EXPECT_EQ(0, std::memcmp(apart[i].data(), together[i].data(), apart[i].size() * sizeof(float)));
        }
      }
  }
}

// ops::warm_ranges: each worker's range starts at the first bytes of its share of the units
// (16-row groups laid end to end over the products; ThreadPool::share_begin with the chunk of
// about 1/8 of a share), in whichever product holds them, and stops at warm_bytes or at the end
// of that product. Worked by hand for E2B-like Q4_0_R16 matrices of 1536 inputs (a 16-row group
// is 16 x 48 blocks x 18 B = 13824 B): q 2048 rows = 128 units, k 256 rows = 16 units.
TEST(Matmul, WarmRangesStartWhereEachWorkersShareStarts) {
  if (!ops::int8_kernel_reads(DType::Q4_0_R16)) GTEST_SKIP() << "no int8 kernel for interleaved rows on this CPU";
  const int64_t in = 1536;
  const uint64_t group = 13824;
  std::vector<std::byte> qb(2048 * group / 16), kb(256 * group / 16);
  const TensorView q = test::matrix_view(DType::Q4_0_R16, 2048, in, qb.data());
  const TensorView k = test::matrix_view(DType::Q4_0_R16, 256, in, kb.data());
  ASSERT_EQ(q.nbytes, qb.size());
  ThreadPool two(2), three(3), one(1);
  ops::MatmulContext ctx{.pool = &two, .panel_rows = 4, .int8_activations = true};
  ctx.decode.warm_bytes = 256u << 10;
  // 144 units, chunk max(1, 144 / 16) = 9: the worker's share starts at round(72 / 9) · 9 = 72, in q.
  auto r = ops::warm_ranges({&q, &k}, ctx);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, q.data + 72 * group);
  EXPECT_EQ(r[0].bytes, 256u << 10);
  // k first: unit 72 is k's 16 units, then q's unit 56.
  r = ops::warm_ranges({&k, &q}, ctx);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, q.data + 56 * group);
  // More than is left of q: up to its end.
  ctx.decode.warm_bytes = 4u << 20;
  r = ops::warm_ranges({&q, &k}, ctx);
  EXPECT_EQ(r[0].bytes, q.nbytes - 72 * group);
  // 3 threads: chunk 144 / 24 = 6, workers start at 48 and 96.
  ctx.pool = &three;
  ctx.decode.warm_bytes = 1000;
  r = ops::warm_ranges({&q, &k}, ctx);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].data, q.data + 48 * group);
  EXPECT_EQ(r[1].data, q.data + 96 * group);
  EXPECT_EQ(r[1].bytes, 1000u);
  // Nothing to warm: a pool of 1, warm_bytes 0, a product that runs on the calling thread (fewer
  // than 64 rows), products that do not run together.
  ctx.pool = &one;
  EXPECT_TRUE(ops::warm_ranges({&q}, ctx).empty());
  ctx.pool = &two;
  ctx.decode.warm_bytes = 0;
  EXPECT_TRUE(ops::warm_ranges({&q}, ctx).empty());
  ctx.decode.warm_bytes = 4096;
  const TensorView small = test::matrix_view(DType::Q4_0_R16, 48, in, qb.data());
  EXPECT_TRUE(ops::warm_ranges({&small}, ctx).empty());
  std::vector<std::byte> fb(size_t(64 * in) * 4);
  const TensorView f = test::matrix_view(DType::F32, 64, in, fb.data());
  EXPECT_TRUE(ops::warm_ranges({&q, &f}, ctx).empty());
  EXPECT_EQ(ops::warm_ranges({&q}, ctx).size(), 1u);
}

// Prefill (T > 2) runs every token against a widened panel of rows (dot_panel, 4 x 2 or 2 x 2
// micro-tiles); decode (T = 1) runs dot_rows on the stored rows. Each token of a prompt must get
// the same bits as that token alone, however the panel, the micro-tiles and the threads cut it.
TEST(Matmul, PrefillPanelsEqualEachTokenAloneBitForBit) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  ThreadPool pool1(1), pool3(3);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (auto [out, in] : {std::pair<int64_t, int64_t>{1, 1}, {5, 17}, {67, 33}, {130, 256}, {200, 1010}, {9, 57}}) {
      Weights w = random_weights(dt, out, in, unsigned(out * 7 + in));
      for (int64_t T : {3, 4, 5, 6, 9, 17}) {
        std::vector<float> x(size_t(T * in)), alone(size_t(T * out)), together(size_t(T * out));
        for (auto& v : x) v = u(rng);
        for (ThreadPool* p : {&pool1, &pool3})
          for (int panel : {1, 2, 3, 8, 64}) {
            ops::MatmulContext ctx{.pool = p, .panel_rows = panel};
            ctx.panel_in = panel == 3 ? in * 5 : 0;  // a narrower matrix than planned: 15 rows per panel
            if (panel == 8) ctx.decode = {4, 8192};  // decode alone: 8 rows per call, prefetch
            std::fill(together.begin(), together.end(), NAN);
            ops::matmul(x.data(), T, w.view, together.data(), ctx);
            std::fill(alone.begin(), alone.end(), NAN);
            for (int64_t t = 0; t < T; ++t) ops::matmul(&x[size_t(t * in)], 1, w.view, &alone[size_t(t * out)], ctx);
            SCOPED_TRACE(std::string(dtype_name(dt)) + " out " + std::to_string(out) + " in " + std::to_string(in) +
                         " T " + std::to_string(T) + " panel " + std::to_string(panel) + " threads " +
                         std::to_string(p->size()));
            for (float v : together) ASSERT_FALSE(std::isnan(v));
            ASSERT_EQ(0, std::memcmp(alone.data(), together.data(), alone.size() * sizeof(float)));
          }
      }
    }
  }
}

TEST(Matmul, DotRowsRefusesARowCountItCannotHold) {
  std::vector<float> x(16, 1.0f), w(16 * 9, 1.0f), out(9);
  for (int rows : {0, 9, -1})
    EXPECT_THROW(ops::dot_rows(x.data(), w.data(), DType::F32, 16, 16, rows, out.data()), Error) << rows;
  ops::dot_rows(x.data(), w.data(), DType::F32, 16, 16, 8, out.data(), 4096);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(out[size_t(r)], 16.0f);
}

TEST(Matmul, DotPanelRefusesOverlappingRowStrides) {
  std::vector<float> x(32, 1.0f), w(64, 1.0f), y(8, NAN);
  EXPECT_THROW(ops::dot_panel(x.data(), 2, 16, w.data(), 8, 2, y.data(), 2), Error);   // ldw < n
  EXPECT_THROW(ops::dot_panel(x.data(), 2, 16, w.data(), 16, 4, y.data(), 2), Error);  // ldy < rows
  ops::dot_panel(x.data(), 2, 16, w.data(), 16, 2, y.data(), 4);
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r) EXPECT_EQ(y[size_t(t * 4 + r)], 16.0f);
}

TEST(Matmul, PlanFitsL2OrRefusesWithTheArithmetic) {
  const DeviceInfo laptop = presets::avx2_laptop();
  const TilePlan p = ops::plan_matmul(laptop, 1536);
  EXPECT_EQ(p.tile.m, 64);  // 64 rows x 1536 x 4 B = 384 KiB within half of the laptop's L2
  EXPECT_LE(uint64_t(p.tile.m) * 1536 * 4, cpu_l2_limit(laptop).bytes / 2);
  const DeviceInfo tiny = presets::with_caches(laptop, 32 << 10, 64 << 10);  // 64 KiB L2 -> 32 KiB budget
  const TilePlan q = ops::plan_matmul(tiny, 4096);                             // 4 rows = 64 KiB: too big
  EXPECT_EQ(q.tile.m, 2);                                                      // 2 rows = 32 KiB fits
  EXPECT_TRUE(q.shrunk);
  try {
    ops::plan_matmul(tiny, 16384);  // one row alone is 64 KiB
    FAIL() << "an impossible plan was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace g4
