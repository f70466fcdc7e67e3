// The BF16_R16 product on AVX2 FMA with f32 activations (gemm_bf16_256.h) against the reference
// loop on the same bf16 weights and f32 activations (f32 summation order only), exact where every
// sum is (a misplaced row or value pair shows), and its invariance: a token's outputs are the
// same bits alone (decode) and in any batch, at any offset, for any row range, through
// ops::matmul on threads and through matmul_shared_input. Skipped by name where the CPU has no
// AVX2 + FMA + F16C; on AVX-512 CPUs the kernel is forced for the tests (ops::matmul does not take
// it there by itself).
#include "ops/matmul/gemm_bf16_256.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/matmul.h"
#include "ops/ref/reference_ops.h"
#include "platform/device.h"
#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/row_interleave.h"
#include "platform/tensor_view.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

// Row-major bf16 weights and the same matrix as BF16_R16, as model/weight_interleave does at load.
struct Bf16Matrix {
  std::vector<uint16_t> rows, groups;
  TensorView row_view, view;
};

Bf16Matrix make_matrix(int64_t out, int64_t in, unsigned seed, bool small_integers = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Bf16Matrix m;
  m.rows.resize(size_t(out * in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      m.rows[size_t(o * in + i)] = f32_to_bf16(small_integers ? float((o * 5 + i * 3) % 7 - 3) : u(rng));
  m.groups = m.rows;
  const uint64_t group_bytes = uint64_t(kInterleaveRows * in) * 2;
  for (int64_t g = 0; g < out / kInterleaveRows; ++g)
    interleave_group(DType::BF16, reinterpret_cast<const std::byte*>(m.rows.data()) + g * group_bytes, in,
                     reinterpret_cast<std::byte*>(m.groups.data()) + g * group_bytes);
  m.row_view = test::matrix_view(DType::BF16, out, in, m.rows.data());
  m.view = test::matrix_view(DType::BF16_R16, out, in, m.groups.data());
  return m;
}

// ops::matmul takes the kernel while one lives, on any CPU that runs it.
struct ForceKernel {
  ForceKernel() { ops::force_gemm_bf16_256(true); }
  ~ForceKernel() { ops::force_gemm_bf16_256(std::nullopt); }
  ForceKernel(const ForceKernel&) = delete;
  ForceKernel& operator=(const ForceKernel&) = delete;
};

class GemmBf16Avx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::gemm_bf16_256_supported()) GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C";
  }
};

// y [T, out] of the kernel on all rows, one call.
std::vector<float> kernel_y(const Bf16Matrix& m, const float* x, int64_t T, int side = 2, uint64_t prefetch = 0) {
  const int64_t out = m.view.shape[0], in = m.view.shape[1];
  std::vector<float> y(size_t(T * out), NAN);
  ops::gemm_bf16_256_rows(x, T, in, m.view.data, 0, out, y.data(), out, side, prefetch);
  return y;
}

// Each output against ref::matmul on the row-major weights: the same exact products summed in
// another f32 order (two chains of in/2 here, one of in there), so within 1.2e-7 · in · Σ|w·x|.
TEST_F(GemmBf16Avx2, MatchesReferenceToSummationOrder) {
  ForceKernel force;
  ThreadPool pool(2);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{16, 2}, {48, 46}, {64, 300}, {160, 1536}, {32, 6144}}) {
    const Bf16Matrix m = make_matrix(out, in, unsigned(out * 7 + in));
    // Σ|w·x| per output: the reference on |w| (sign bits cleared) and |x|.
    std::vector<uint16_t> abs_rows(m.rows);
    for (uint16_t& b : abs_rows) b &= 0x7FFF;
    const TensorView abs_view = test::matrix_view(DType::BF16, out, in, abs_rows.data());
    for (int64_t T : {1, 2, 5, 6, 7, 13, 70}) {
      const std::vector<float> x = test::random_activations(T * in, unsigned(T + in));
      std::vector<float> abs_x(x.size()), want(size_t(T * out)), mag(want.size()), got(want.size());
      for (size_t i = 0; i < x.size(); ++i) abs_x[i] = std::fabs(x[i]);
      ref::matmul(x.data(), T, m.row_view, want.data());
      ref::matmul(abs_x.data(), T, abs_view, mag.data());
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const ops::MatmulContext ctx{.pool = p, .panel_rows = 4};
        ASSERT_TRUE(ops::uses_bf16_256_kernel(ctx));
        std::fill(got.begin(), got.end(), NAN);
        ops::matmul(x.data(), T, m.view, got.data(), ctx);
        for (size_t k = 0; k < got.size(); ++k)
          ASSERT_NEAR(got[k], want[k], 1.2e-7 * double(in) * double(mag[k]) + 1e-30)
              << "out " << out << " in " << in << " T " << T << " token " << int64_t(k) / out << " row " << int64_t(k) % out;
      }
    }
  }
}

// Small integers: every product and partial sum is exact in f32, so each output must be the
// integer dot product exactly, whatever the order (a misplaced lane, row or pair would not be).
TEST_F(GemmBf16Avx2, ExactOnSmallIntegers) {
  const int64_t out = 48, in = 70;
  const Bf16Matrix m = make_matrix(out, in, 0, true);
  for (int64_t T : {1, 7, 20}) {
    std::vector<float> x(size_t(T * in));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < in; ++i) x[size_t(t * in + i)] = float((t * 3 + i * 7) % 9 - 4);
    for (int side : {1, 2}) {
      const std::vector<float> y = kernel_y(m, x.data(), T, side);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) {
          int64_t want = 0;
          for (int64_t i = 0; i < in; ++i) want += ((t * 3 + i * 7) % 9 - 4) * ((o * 5 + i * 3) % 7 - 3);
          ASSERT_EQ(y[size_t(t * out + o)], float(want)) << "T " << T << " t " << t << " o " << o << " side " << side;
        }
    }
  }
}

// One even and one odd chain per row and token, the same in decode and prefill: each token of a
// batch of T = 2..13 or 70 (any tile position, a last short tile) equals the token alone (1 or 2
// groups side by side, prefetch inside a group, past its end and past the matrix), and row ranges
// cut anywhere on a group give the same bits.
TEST_F(GemmBf16Avx2, TokenResultsDoNotDependOnBatchRowsOrStreams) {
  const int64_t out = 112, in = 202, T = 70;  // 7 groups: pairs and a last group alone
  const Bf16Matrix m = make_matrix(out, in, 6);
  const std::vector<float> x = test::random_activations(T * in, 10);
  std::vector<std::vector<float>> alone;
  for (int64_t t = 0; t < T; ++t) alone.push_back(kernel_y(m, &x[size_t(t * in)], 1, 2, 4096));
  for (int64_t t : {0, 5, 69})
    for (int side : {1, 2})
      for (uint64_t prefetch : {uint64_t(0), uint64_t(256), uint64_t(8192)}) {
        const std::vector<float> one = kernel_y(m, &x[size_t(t * in)], 1, side, prefetch);
        EXPECT_EQ(0, std::memcmp(one.data(), alone[size_t(t)].data(), size_t(out) * 4))
            << "token " << t << ", " << side << " side by side, prefetch " << prefetch;
      }
  for (int64_t n : {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 70})
    for (int64_t t0 : {int64_t(0), T - n}) {
      const std::vector<float> batch = kernel_y(m, &x[size_t(t0 * in)], n);
      for (int64_t t = 0; t < n; ++t)
        ASSERT_EQ(0, std::memcmp(&batch[size_t(t * out)], alone[size_t(t0 + t)].data(), size_t(out) * 4))
            << "token " << t0 + t << " in a batch of " << n << " from " << t0;
    }
  // Tokens 5..14, rows in two ranges (the second starting at an odd group).
  std::vector<float> part(size_t(10 * out), NAN);
  ops::gemm_bf16_256_rows(&x[size_t(5 * in)], 10, in, m.view.data, 48, out, part.data(), out, 2);
  ops::gemm_bf16_256_rows(&x[size_t(5 * in)], 10, in, m.view.data, 0, 48, part.data(), out, 2);
  for (int64_t t = 0; t < 10; ++t)
    EXPECT_EQ(0, std::memcmp(&part[size_t(t * out)], alone[size_t(5 + t)].data(), size_t(out) * 4)) << "token " << 5 + t;
  EXPECT_THROW(ops::gemm_bf16_256_rows(x.data(), 1, in, m.view.data, 0, 40, part.data(), out, 2), Error);
  EXPECT_THROW(ops::gemm_bf16_256_rows(x.data(), 1, 201, m.view.data, 0, 16, part.data(), out, 2), Error);
}

// Through ops::matmul and matmul_shared_input (one hand-off for three products of one input) on
// 2 threads: each product the same bits as the kernel on one thread, decode and prefill.
TEST_F(GemmBf16Avx2, MatmulAndSharedInputAreBitExactAcrossThreads) {
  ForceKernel force;
  const int64_t in = 256;
  const Bf16Matrix a = make_matrix(128, in, 31), b = make_matrix(48, in, 32), c = make_matrix(256, in, 33);
  ThreadPool pool(2);
  const ops::MatmulContext ctx{.pool = &pool, .panel_rows = 4};
  for (int64_t T : {1, 3, 13, 70}) {
    const std::vector<float> x = test::random_activations(T * in, unsigned(40 + T));
    std::vector<std::vector<float>> shared;
    std::vector<ops::Product> products;
    for (const Bf16Matrix* m : {&a, &b, &c}) shared.emplace_back(size_t(T * m->view.shape[0]), NAN);
    products = {{&a.view, shared[0].data()}, {&b.view, shared[1].data()}, {&c.view, shared[2].data()}};
    ops::matmul_shared_input(x.data(), T, products, ctx);
    size_t i = 0;
    for (const Bf16Matrix* m : {&a, &b, &c}) {
      const std::vector<float> want = kernel_y(*m, x.data(), T);
      std::vector<float> separate(want.size(), NAN);
      ops::matmul(x.data(), T, m->view, separate.data(), ctx);
      EXPECT_EQ(0, std::memcmp(separate.data(), want.data(), want.size() * 4)) << "matmul, T " << T << " product " << i;
      EXPECT_EQ(0, std::memcmp(shared[i].data(), want.data(), want.size() * 4)) << "shared, T " << T << " product " << i;
      ++i;
    }
  }
}

// Which products take the kernel: BF16_R16 without the bf16 kernel; what describe_matmul and
// mac_unit_of say; by itself only where the CPU has no AVX-512 (there nothing changes).
TEST_F(GemmBf16Avx2, DispatchDescriptionAndUnit) {
  EXPECT_EQ(ops::gemm_bf16_256_available(), !host_cpu().avx512_usable());
  ForceKernel force;
  const ops::MatmulContext f32{.pool = nullptr, .panel_rows = 4}, bf16{.pool = nullptr, .panel_rows = 4, .bf16_compute = true};
  EXPECT_TRUE(ops::uses_bf16_256_kernel(f32));
  EXPECT_TRUE(ops::reads_bf16_interleaved(f32));
  EXPECT_EQ(ops::uses_bf16_256_kernel(bf16), !ops::gemm_bf16_available());  // VDPBF16PS first where it runs
  EXPECT_EQ(ops::mac_unit_of(f32, DType::BF16_R16), MacUnit::F32Fma);
  const std::string d = ops::describe_matmul(f32, DType::BF16_R16);
  EXPECT_NE(d.find("BF16 weights, 16 rows interleaved, widened to f32 in registers, f32 FMA (AVX2)"), std::string::npos) << d;
  ops::force_gemm_bf16_256(false);
  EXPECT_FALSE(ops::uses_bf16_256_kernel(f32));
  EXPECT_FALSE(ops::reads_bf16_interleaved(f32));
  EXPECT_NE(ops::describe_matmul(f32, DType::BF16_R16).find("reference loops"), std::string::npos);
}

}  // namespace
}  // namespace g4
