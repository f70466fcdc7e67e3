// The int8 weight product (VPDPBUSD on Q8_0/Q4_0 blocks, row-major and interleaved, and on the
// K-quant super-blocks of gemm_kquant.h; AMX-INT8 tiles for interleaved prefill, on the CPU's
// tiles where its kernel check passed, else on the software tile model) against three
// independent truths:
// ref::matmul on the dequantized int8 activations (the kernel's own arithmetic, so the error is
// f32 rounding only), ref::matmul on the original f32 activations (bounded by the activation
// rounding the quantizer allows), and itself one token at a time (bit for bit).
#include "ops/matmul/gemm_q8.h"
#include "ops/amx/gemm_q8_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "ops/matmul/matmul.h"
#include "ops/matmul_context_options.h"
#include "ops/quant/quant_dot.h"
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

struct BlockWeights {
  std::vector<std::byte> bytes;
  std::vector<float> values;  // dequantized, [out, in]
  TensorView view;
};

// Interleaved formats (Q8_0_R16, Q4_0_R16): the rows are quantized to the base format, their
// values taken from there (dequantize_row, the format's spec), and only then interleaved.
BlockWeights make_weights(DType t, int64_t out, int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.5f);
  std::vector<float> src(size_t(out * in));
  for (auto& v : src) v = g(rng);
  BlockWeights w;
  const DType base = interleave_base(t);
  const uint64_t rb = row_bytes(base, in);
  w.bytes.resize(size_t(rb * uint64_t(out)));
  w.values.resize(src.size());
  for (int64_t o = 0; o < out; ++o) {
    ops::quantize_row(base, &src[size_t(o * in)], &w.bytes[size_t(rb * uint64_t(o))], in);
    dequantize_row(base, &w.bytes[size_t(rb * uint64_t(o))], &w.values[size_t(o * in)], in);
  }
  if (dtype_is_interleaved(t)) {
    const std::vector<std::byte> rows = w.bytes;
    const uint64_t group = rb * uint64_t(kInterleaveRows);
    for (int64_t gi = 0; gi < out / kInterleaveRows; ++gi)
      interleave_group(base, &rows[size_t(group * uint64_t(gi))], in, &w.bytes[size_t(group * uint64_t(gi))]);
  }
  w.view = test::matrix_view(t, out, in, w.bytes.data());
  return w;
}

// Row counts: as asked for the row-major formats, rounded up to whole groups of 16 for the
// interleaved ones (g4 interleaves only matrices whose rows fill their groups).
int64_t rows_for(DType t, int64_t n) { return dtype_is_interleaved(t) ? (n + 15) / 16 * 16 : n; }

// The kernel's arithmetic, done by the reference loop: dequantized weights × dequantized int8
// activations in f32. Only f32 summation order differs, so the error is a few ulps of Σ|w·x|.
void expect_near_dequantized(const ops::Q8Activations& a, const BlockWeights& w, int64_t out, const std::vector<float>& got) {
  const int64_t T = a.T, in = a.in;
  std::vector<float> xd(size_t(T * in));
  for (size_t i = 0; i < xd.size(); ++i) xd[i] = float(a.q[i]) * a.scale[i / 32];
  std::vector<float> want(size_t(T * out));
  ref::matmul(xd.data(), T, test::matrix_view(DType::F32, out, in, w.values.data()), want.data());
  for (int64_t tt = 0; tt < T; ++tt)
    for (int64_t o = 0; o < out; ++o) {
      double mag = 0;
      for (int64_t i = 0; i < in; ++i) mag += std::fabs(double(w.values[size_t(o * in + i)]) * xd[size_t(tt * in + i)]);
      const size_t k = size_t(tt * out + o);
      ASSERT_NEAR(got[k], want[k], 1e-5 * mag + 1e-6) << "token " << tt << " row " << o;
    }
}

TEST(Q8Activations, QuantizerRoundTripsWithinHalfAStep) {
  const int64_t T = 3, in = 96;
  std::vector<float> x = test::random_activations(T * in, 5);
  for (int i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;  // an all-zero block: scale 0, values 0
  x[70] = 1e-30f;
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), T, in, a);
  ASSERT_EQ(a.pairs(), 2);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < in / 32; ++b) {
      float amax = 0;
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(t * in + b * 32 + i)]));
      const float d = a.scale[size_t(t * 3 + b)];
      EXPECT_EQ(d, amax / 127.0f);
      for (int i = 0; i < 32; ++i) {
        const size_t k = size_t(t * in + b * 32 + i);
        EXPECT_LE(std::abs(int(a.q[k])), 127);
        EXPECT_LE(std::fabs(float(a.q[k]) * d - x[k]), 0.5f * d * 1.0001f + 1e-37f) << "t " << t << " i " << k;
        sum += a.q[k];
      }
      const size_t lane = size_t((t * 2 + b / 2) * 16 + (b % 2) * 8);
      EXPECT_EQ(a.q4_bias[lane], -8 * sum);
      for (int l = 0; l < 8; ++l) EXPECT_EQ(a.pair_scale[lane + size_t(l)], d);
    }
  // The odd block count leaves the second half of the last pair empty: scale 0, bias 0.
  for (int64_t t = 0; t < T; ++t)
    for (int l = 8; l < 16; ++l) {
      EXPECT_EQ(a.pair_scale[size_t((t * 2 + 1) * 16 + l)], 0.0f);
      EXPECT_EQ(a.q4_bias[size_t((t * 2 + 1) * 16 + l)], 0);
    }
}

// Each tier's SIMD quantizer (AVX-512, AVX2) is the scalar one, bit for bit: ties, signs, zero
// and tiny blocks, outliers, values exactly at ±amax.
TEST(Q8Activations, SimdQuantizerEqualsScalar) {
  std::vector<float> x = test::random_activations(32 * 200, 9);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i - 16) * 0.5f;        // many exact halves after scaling
  for (int i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;                       // all zero
  for (int i = 64; i < 96; ++i) x[size_t(i)] = (i % 2 ? -1.0f : 1.0f) * 1e-38f;  // subnormal-adjacent
  x[100] = -1e4f;                                                           // an outlier
  for (Int8Dot tier : {Int8Dot::Avx2, Int8Dot::Avx512Vnni}) {
    if (!host_cpu().runs_int8_tier(tier)) continue;  // the tier's quantizer needs its instructions
    ops::force_int8_kernel_tier(tier);
    for (size_t b = 0; b < x.size() / 32; ++b)
      EXPECT_TRUE(ops::quantize_block_matches_scalar(&x[b * 32])) << int8_dot_name(tier) << " block " << b;
  }
  ops::force_int8_kernel_tier(std::nullopt);
}

// Token ranges quantized separately (as the pool's threads do, in any order) fill every layout
// exactly as one call over all tokens; the last panel's cells past T stay zero.
TEST(Q8Activations, TokenRangesEqualOneCall) {
  const int64_t T = 17, in = 96;  // 3 panels of 6, the last one with 5 tokens
  std::vector<float> x = test::random_activations(T * in, 31);
  ops::Q8Activations whole, parts;
  ops::quantize_activations(x.data(), T, in, whole);
  parts.panel_q.assign(whole.panel_q.size(), 99);  // stale values the sizing must not leave behind
  ops::size_activations(T, in, ops::kQ8RowTiles | ops::kQ8Panels, parts);
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{9, 17}, {0, 4}, {4, 9}}) ops::quantize_tokens(x.data(), t0, t1, parts);
  EXPECT_EQ(whole.q, parts.q);
  EXPECT_EQ(whole.scale, parts.scale);
  EXPECT_EQ(whole.q8_start, parts.q8_start);
  EXPECT_EQ(whole.q4_start, parts.q4_start);
  EXPECT_EQ(whole.q6_start, parts.q6_start);
  EXPECT_EQ(whole.pair_scale, parts.pair_scale);
  EXPECT_EQ(whole.q4_bias, parts.q4_bias);
  EXPECT_EQ(whole.panel_q, parts.panel_q);
  EXPECT_EQ(whole.panel_q8_start, parts.panel_q8_start);
  EXPECT_EQ(whole.panel_q4_start, parts.panel_q4_start);
  EXPECT_EQ(whole.panel_q6_start, parts.panel_q6_start);
  // Q6_K's starting sums, summed here from the quantized values: −32·Σq per half block, per
  // token (decode) and per panel cell (prefill); zero in the last panel's cells past T.
  for (int64_t t = 0; t < 18; ++t)
    for (int64_t b = 0; b < in / 32; ++b)
      for (int half = 0; half < 2; ++half) {
        int32_t s = 0;
        for (int i = 0; i < 16; ++i) s += t < T ? whole.q[size_t(t * in + b * 32 + 16 * half + i)] : 0;
        EXPECT_EQ(whole.panel_q6_start[whole.panel_cell(t, b) * 2 + size_t(half)], -32 * s) << t << " " << b;
        if (t < T) {
          EXPECT_EQ(whole.q6_start[size_t((t * (in / 32) + b) * 2 + half)], -32 * s) << t << " " << b;
        }
      }
  EXPECT_EQ(whole.panel_scale, parts.panel_scale);
  // Token 17 (panel 2, slot 5) is padding: zero bytes, scale and start in every block.
  const int64_t blocks = in / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t cell = size_t((2 * blocks + b) * ops::kPanelTokens + 5);
    EXPECT_EQ(parts.panel_scale[cell], 0.0f);
    EXPECT_EQ(parts.panel_q8_start[cell], 0);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(parts.panel_q[cell * 32 + size_t(i)], 0) << "block " << b;
  }
  // A panel cell holds the token's row-major bytes: token 7 is panel 1, slot 1.
  EXPECT_EQ(0, std::memcmp(&parts.panel_q[size_t((1 * blocks + 2) * ops::kPanelTokens + 1) * 32], &parts.q[size_t(7 * in + 64)], 32));
  EXPECT_THROW(ops::quantize_tokens(x.data(), 10, T + 1, parts), Error);  // past the sized tokens
  EXPECT_THROW(ops::quantize_tokens(x.data(), 5, 4, parts), Error);
  EXPECT_THROW(ops::size_activations(0, in, 0, parts), Error);
  EXPECT_THROW(ops::size_activations(T, 48, 0, parts), Error);
}

// A few tokens' block pairs quantized separately (as the pool's threads do for decoding streams,
// in any order) fill every layout exactly as one call; an odd block count's last pair holds one.
TEST(Q8Activations, BlockPairRangesEqualOneCall) {
  for (const int64_t T : {int64_t(1), int64_t(3), int64_t(8)}) {
    const int64_t in = 160;  // 5 blocks: pairs {0,1}, {2,3}, {4}
    std::vector<float> x = test::random_activations(T * in, 37);
    ops::Q8Activations whole, parts;
    ops::quantize_activations(x.data(), T, in, whole);
    parts.panel_q.assign(whole.panel_q.size(), 99);  // stale values the sizing must not leave behind
    ops::size_activations(T, in, ops::kQ8RowTiles | ops::kQ8Panels, parts);
    parts.pair_scale.assign(parts.pair_scale.size(), 7.0f);  // stale values each range must overwrite
    for (auto [p0, p1] : {std::pair<int64_t, int64_t>{2, 3}, {0, 1}, {1, 2}})
      ops::quantize_token_blocks(x.data(), 0, T, p0, p1, parts);
    EXPECT_EQ(whole.q, parts.q) << T;
    EXPECT_EQ(whole.scale, parts.scale) << T;
    EXPECT_EQ(whole.q4_start, parts.q4_start) << T;
    EXPECT_EQ(whole.q6_start, parts.q6_start) << T;
    EXPECT_EQ(whole.pair_scale, parts.pair_scale) << T;
    EXPECT_EQ(whole.q4_bias, parts.q4_bias) << T;
    if (T > 1) {
      EXPECT_EQ(whole.panel_q, parts.panel_q) << T;
      EXPECT_EQ(whole.panel_q4_start, parts.panel_q4_start) << T;
      EXPECT_EQ(whole.panel_q6_start, parts.panel_q6_start) << T;
      EXPECT_EQ(whole.panel_scale, parts.panel_scale) << T;
    }
    // One range alone writes its own blocks' bytes and no others (the threads' ranges never overlap).
    ops::Q8Activations one;
    ops::size_activations(T, in, ops::kQ8RowTiles | ops::kQ8Panels, one);
    one.q.assign(one.q.size(), 99);
    ops::quantize_token_blocks(x.data(), 0, T, 1, 2, one);  // blocks 2 and 3
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < in / 32; ++b)
        for (int i = 0; i < 32; ++i) {
          const size_t at = size_t(t * in + b * 32 + i);
          ASSERT_EQ(one.q[at], b == 2 || b == 3 ? whole.q[at] : int8_t(99)) << "token " << t << " block " << b;
        }
    EXPECT_THROW(ops::quantize_token_blocks(x.data(), 0, T, 2, 4, parts), Error);  // past the 3 pairs
    EXPECT_THROW(ops::quantize_token_blocks(x.data(), 0, T, 2, 1, parts), Error);
    // The errors name the function and the range refused (quantize_tokens reaches them too).
    try {
      ops::quantize_token_blocks(x.data(), 0, T, 2, 4, parts);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("quantize_token_blocks: block pairs [2, 4)"), std::string::npos) << e.what();
    }
    try {
      ops::quantize_tokens(x.data(), 0, T + 1, parts);
      ADD_FAILURE() << "a token range past the sized activations was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tokens [0, " + std::to_string(T + 1) + ")"), std::string::npos) << e.what();
    }
  }
}

// The int8 kernels' tiers, each forced in turn (ops::force_int8_kernel_tier): a tier runs where
// the probe confirmed it and is skipped by name elsewhere, never silently.
const auto kTiers = ::testing::Values(Int8Dot::Avx2, Int8Dot::AvxVnni, Int8Dot::Avx512Vnni, Int8Dot::NeonDot);

// Runs the int8 kernels on `tier` until destroyed; skip() says why not when the CPU lacks it.
class ForcedTier {
 public:
  explicit ForcedTier(Int8Dot tier) : tier_(tier), ok_(host_cpu().runs_int8_tier(tier)) {
    if (ok_) ops::force_int8_kernel_tier(tier);
  }
  ~ForcedTier() { ops::force_int8_kernel_tier(std::nullopt); }
  bool ok() const { return ok_; }
  std::string skip() const {
    return "int8 tier " + std::string(int8_dot_name(tier_)) + " not run: this CPU did not confirm it (its best: " +
           std::string(int8_dot_name(host_cpu().int8_dot())) + ")";
  }

 private:
  Int8Dot tier_;
  bool ok_;
};

class GemmQ8 : public ::testing::TestWithParam<std::tuple<DType, Int8Dot>> {
 protected:
  void SetUp() override {
    tier_.emplace(std::get<1>(GetParam()));
    if (!tier_->ok()) GTEST_SKIP() << tier_->skip();
    if (!ops::int8_kernel_reads(std::get<0>(GetParam())))
      GTEST_SKIP() << "the " << int8_dot_name(std::get<1>(GetParam())) << " kernels do not read "
                   << dtype_name(std::get<0>(GetParam())) << " (int8_kernel_reads; describe_matmul says so)";
  }
  void TearDown() override { tier_.reset(); }
  std::optional<ForcedTier> tier_;
};

std::string format_and_tier(DType t, Int8Dot tier) {
  std::string s = std::string(dtype_name(t)) + "_" + std::string(int8_dot_name(tier));
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// The kernel's arithmetic, done by the reference loop (expect_near_dequantized).
TEST_P(GemmQ8, MatchesReferenceOnTheQuantizedActivations) {
  const DType t = std::get<0>(GetParam());
  for (int64_t in : {32, 96, 256, 1536}) {
    if (in % dtype_block_size(interleave_base(t))) continue;  // K-quants: whole super-blocks of 256
    for (int64_t T : {1, 3, 5, 7, 8, 70}) {  // 3-8: a few streams' one-pass kernel
      // 3 groups of 16 interleaved rows: with 2 groups side by side, a pair and a last one alone.
      const int64_t out = rows_for(t, 45);
      BlockWeights w = make_weights(t, out, in, unsigned(in + T));
      std::vector<float> x = test::random_activations(T * in, unsigned(7 * in + T));
      ops::Q8Activations a;
      ops::quantize_activations(x.data(), T, in, a);
      for (int side_by_side : {1, 2}) {
        SCOPED_TRACE("in " + std::to_string(in) + " T " + std::to_string(T) + " few_groups " + std::to_string(side_by_side));
        ops::DecodeStreaming plan;
        plan.few_groups = side_by_side;
        std::vector<float> got(size_t(T * out), -1.0f);
        ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, got.data(), out, plan);
        expect_near_dequantized(a, w, out, got);
      }
    }
  }
}

// Against the unquantized activations the error is the activation rounding: each value moves by
// at most half its block's step (absmax/127), so |y − y_f32| <= Σ_i |w_i| · step_i / 2.
TEST_P(GemmQ8, ErrorAgainstF32ActivationsWithinTheRoundingBound) {
  const DType t = std::get<0>(GetParam());
  const int64_t T = 4, in = 512, out = rows_for(t, 37);
  BlockWeights w = make_weights(t, out, in, 11);
  std::vector<float> x = test::random_activations(T * in, 12);
  x[40] = 60.0f;  // an outlier widens its block's step
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), T, in, a);
  std::vector<float> exact(size_t(T * out)), got(size_t(T * out));
  ref::matmul(x.data(), T, test::matrix_view(DType::F32, out, in, w.values.data()), exact.data());
  ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, got.data(), out);
  double worst_ratio = 0;
  for (int64_t tt = 0; tt < T; ++tt)
    for (int64_t o = 0; o < out; ++o) {
      double bound = 0, mag = 0;
      for (int64_t i = 0; i < in; ++i) {
        const double wi = std::fabs(w.values[size_t(o * in + i)]);
        bound += wi * 0.5 * a.scale[size_t((tt * in + i) / 32)];
        mag += wi * std::fabs(x[size_t(tt * in + i)]);
      }
      const size_t k = size_t(tt * out + o);
      const double err = std::fabs(double(got[k]) - exact[k]);
      EXPECT_LE(err, bound + 1e-5 * mag) << "token " << tt << " row " << o;
      worst_ratio = std::max(worst_ratio, err / bound);
    }
  EXPECT_GT(worst_ratio, 0.0);  // the activations really were rounded: not an f32 path in disguise
}

// A token's outputs are identical bit for bit whatever the batch, its position in it and the row
// range (thread split) that computes them. T 2-8: a few streams decoding together (one pass
// over the weights for all of them); 70: prefill, its conversion split over the pool.
class GemmQ8Batch : public ::testing::TestWithParam<std::tuple<DType, int64_t, Int8Dot>> {};

TEST_P(GemmQ8Batch, BatchRowRangeAndThreadsDoNotChangeABit) {
  const auto [t, T, tier] = GetParam();
  const ForcedTier forced(tier);
  if (!forced.ok()) GTEST_SKIP() << forced.skip();
  if (!ops::int8_kernel_reads(t)) GTEST_SKIP() << "the " << int8_dot_name(tier) << " kernels do not read " << dtype_name(t);
  const int64_t in = 256, out = rows_for(t, 67);
  BlockWeights w = make_weights(t, out, in, 21);
  std::vector<float> x = test::random_activations(T * in, 22);
  ops::Q8Activations all;
  ops::quantize_activations(x.data(), T, in, all);
  std::vector<float> batched(size_t(T * out));
  ops::gemm_q8_rows(all, w.bytes.data(), t, 0, out, batched.data(), out);
  std::vector<float> split(size_t(T * out));
  // Three row ranges (whole groups for the interleaved formats).
  const std::vector<int64_t> cuts = dtype_is_interleaved(t) ? std::vector<int64_t>{0, 16, 48, out}
                                                            : std::vector<int64_t>{0, 5, 33, out};
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    ops::gemm_q8_rows(all, w.bytes.data(), t, cuts[i], cuts[i + 1], split.data(), out);
  EXPECT_EQ(0, std::memcmp(batched.data(), split.data(), batched.size() * 4));
  // A few streams with two row groups side by side per thread (ops::DecodeStreaming::few_groups;
  // odd ranges leave a group alone): the same bits, prefetching or not.
  for (uint64_t prefetch : {uint64_t(0), uint64_t(2048)}) {
    ops::DecodeStreaming pairs;
    pairs.few_groups = 2;
    pairs.few_prefetch_bytes = prefetch;
    std::vector<float> paired(size_t(T * out), -1.0f);
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      ops::gemm_q8_rows(all, w.bytes.data(), t, cuts[i], cuts[i + 1], paired.data(), out, pairs);
    EXPECT_EQ(0, std::memcmp(batched.data(), paired.data(), batched.size() * 4)) << "prefetch " << prefetch;
  }
  for (int64_t tt = 0; tt < T; ++tt) {
    ops::Q8Activations one;
    ops::quantize_activations(&x[size_t(tt * in)], 1, in, one);
    std::vector<float> alone(static_cast<size_t>(out));
    ops::gemm_q8_rows(one, w.bytes.data(), t, 0, out, alone.data(), out);
    ASSERT_EQ(0, std::memcmp(alone.data(), &batched[size_t(tt * out)], size_t(out) * 4)) << "token " << tt;
  }
  ThreadPool pool(2);
  ops::MatmulContext ctx;
  ctx.pool = &pool;
  ctx.int8_activations = true;
  ASSERT_TRUE(ops::uses_int8_kernel(ctx));
  std::vector<float> pooled(size_t(T * out));
  ops::matmul(x.data(), T, w.view, pooled.data(), ctx);
  EXPECT_EQ(0, std::memcmp(batched.data(), pooled.data(), batched.size() * 4));
  const std::string desc = ops::describe_matmul(ctx, t);
  EXPECT_NE(desc.find(int8_dot_instruction(tier)), std::string::npos) << desc;
}

INSTANTIATE_TEST_SUITE_P(FormatsAndBatches, GemmQ8Batch,
                         ::testing::Combine(::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q8_0_R16, DType::Q4_0_R16,
                                                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_K_R16,
                                                              DType::Q5_K_R16, DType::Q6_K_R16),
                                            ::testing::Values(int64_t{2}, int64_t{4}, int64_t{7}, int64_t{8}, int64_t{70}),
                                            kTiers),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int64_t, Int8Dot>>& p) {
                           return format_and_tier(std::get<0>(p.param), std::get<2>(p.param)) + "_T" +
                                  std::to_string(std::get<1>(p.param));
                         });

// A few tokens wide enough that ops::matmul quantizes their activations on the pool (T x in >=
// 16384), which splits them by block pairs: each token's outputs equal the token alone through
// the one-token path (quantized whole on the calling thread), bit for bit. 65 blocks (Q8_0/Q4_0)
// leave an odd last pair; the K-quants take whole 256-value super-blocks.
class GemmQ8PooledFew : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(GemmQ8PooledFew, EachTokenEqualsItselfAlone) {
  if (!ops::gemm_q8_available()) GTEST_SKIP() << "this CPU has no integer dot product (probe + self-test)";
  const auto [t, T] = GetParam();
  if (!ops::int8_kernel_reads(t))
    GTEST_SKIP() << "the " << int8_dot_name(ops::int8_kernel_tier()) << " kernels do not read " << dtype_name(t);
  const DType base = interleave_base(t);
  const bool kquant = base == DType::Q4_K || base == DType::Q5_K || base == DType::Q6_K;
  const int64_t in = kquant ? 2304 : 2080, out = rows_for(t, 40);
  ASSERT_GE(T * in, 16384) << "too narrow to reach the pool split";
  BlockWeights w = make_weights(t, out, in, 41);
  std::vector<float> x = test::random_activations(T * in, 42);
  ThreadPool pool(2);  // the engine's own context on this CPU, int8 activations
  const ops::MatmulContext ctx = ops::make_matmul_context(&pool, host_cpu(), in, false, true);
  std::vector<float> pooled(size_t(T * out));
  ops::matmul(x.data(), T, w.view, pooled.data(), ctx);
  for (int64_t tt = 0; tt < T; ++tt) {
    std::vector<float> alone(static_cast<size_t>(out));
    ops::matmul(&x[size_t(tt * in)], 1, w.view, alone.data(), ctx);
    ASSERT_EQ(0, std::memcmp(alone.data(), &pooled[size_t(tt * out)], size_t(out) * 4)) << "token " << tt;
  }
}

INSTANTIATE_TEST_SUITE_P(FormatsAndBatches, GemmQ8PooledFew,
                         ::testing::Combine(::testing::Values(DType::Q8_0, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q6_K),
                                            ::testing::Values(int64_t{8}, int64_t{16})),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int64_t>>& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_T" +
                                  std::to_string(std::get<1>(p.param));
                         });

// The interleaved kernel works on whole 16-row groups; a range that cuts one is refused, not
// computed from the wrong rows.
TEST(GemmQ8Interleaved, RefusesARowRangeThatSplitsAGroup) {
  if (!ops::int8_kernel_reads(DType::Q8_0_R16)) GTEST_SKIP() << "no int8 kernel for interleaved rows on this CPU";
  BlockWeights w = make_weights(DType::Q8_0_R16, 32, 64, 51);
  std::vector<float> x = test::random_activations(64, 52), y(32);
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), 1, 64, a);
  EXPECT_THROW(ops::gemm_q8_rows(a, w.bytes.data(), DType::Q8_0_R16, 0, 20, y.data(), 32), Error);
  EXPECT_THROW(ops::gemm_q8_rows(a, w.bytes.data(), DType::Q8_0_R16, 8, 32, y.data(), 32), Error);
  EXPECT_NO_THROW(ops::gemm_q8_rows(a, w.bytes.data(), DType::Q8_0_R16, 16, 32, y.data(), 32));
}

// Activations quantized without the layout a kernel reads are refused by name, never read past
// the end of an empty buffer: panels for interleaved prefill, row-tile scales for row-major rows.
TEST(GemmQ8Interleaved, RefusesActivationsWithoutTheLayoutItsKernelReads) {
  if (!ops::int8_kernel_reads(DType::Q8_0_R16)) GTEST_SKIP() << "no int8 kernel for interleaved rows on this CPU";
  BlockWeights inter = make_weights(DType::Q4_0_R16, 32, 64, 53), rows = make_weights(DType::Q4_0, 32, 64, 54);
  std::vector<float> x = test::random_activations(3 * 64, 55), y(3 * 32);
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), 3, 64, a, ops::kQ8RowTiles);
  try {
    ops::gemm_q8_rows(a, inter.bytes.data(), DType::Q4_0_R16, 0, 32, y.data(), 32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token panels"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::gemm_q8_rows(a, rows.bytes.data(), DType::Q4_0, 0, 32, y.data(), 32));
  ops::quantize_activations(x.data(), 3, 64, a, ops::kQ8Panels);
  EXPECT_THROW(ops::gemm_q8_rows(a, rows.bytes.data(), DType::Q4_0, 0, 32, y.data(), 32), Error);
  EXPECT_NO_THROW(ops::gemm_q8_rows(a, inter.bytes.data(), DType::Q4_0_R16, 0, 32, y.data(), 32));
  ops::quantize_activations(x.data(), 1, 64, a, 0);  // decode on interleaved rows needs neither
  EXPECT_NO_THROW(ops::gemm_q8_rows(a, inter.bytes.data(), DType::Q4_0_R16, 0, 32, y.data(), 32));
}

// How decode reads its weights (plan_decode_streaming: 1, 2 or 4 groups side by side, software
// prefetch) changes what is requested from memory and in which order, never what is computed:
// every streaming gives the same bits as one group at a time without prefetch, including group
// counts that leave a remainder and a prefetch that runs past the end of the matrix.
TEST(GemmQ8Interleaved, DecodeStreamingChangesNoBits) {
  if (!ops::int8_kernel_reads(DType::Q8_0_R16)) GTEST_SKIP() << "no int8 kernel for interleaved rows on this CPU";
  for (Int8Dot tier : {Int8Dot::Avx2, Int8Dot::AvxVnni, Int8Dot::Avx512Vnni}) {  // each tier the CPU has
    const ForcedTier forced(tier);
    if (!forced.ok()) continue;
    for (DType t : {DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q5_K_R16, DType::Q6_K_R16}) {
      const int64_t in = 256, out = 16 * 7;  // 7 groups: 4 + 2 + 1
      BlockWeights w = make_weights(t, out, in, 61);
      std::vector<float> x = test::random_activations(in, 62), plain(static_cast<size_t>(out)), other(static_cast<size_t>(out));
      ops::Q8Activations a;
      ops::quantize_activations(x.data(), 1, in, a);
      ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, plain.data(), out, {1, 0});
      for (int groups : {1, 2, 4})
        for (uint64_t bytes : {0ull, 64ull, 8192ull, 1ull << 20})
          for (auto [b, e] : {std::pair<int64_t, int64_t>{0, out}, {16, 96}, {48, 64}})
            for (bool wide : {false, true}) {  // wide: `groups` reached through the long-group rule
              const ops::DecodeStreaming streaming = wide ? ops::DecodeStreaming{1, bytes, 1024, groups}
                                                          : ops::DecodeStreaming{groups, bytes};
              std::fill(other.begin(), other.end(), NAN);
              ops::gemm_q8_rows(a, w.bytes.data(), t, b, e, other.data(), out, streaming);
              EXPECT_EQ(0, std::memcmp(plain.data() + b, other.data() + b, size_t(e - b) * 4))
                  << int8_dot_name(tier) << " " << dtype_name(t) << " groups " << groups << " prefetch " << bytes
                  << " rows " << b << "-" << e;
              for (int64_t r = 0; r < out; ++r) {  // and no row outside the range is written
                if (r < b || r >= e) {
                  ASSERT_TRUE(std::isnan(other[size_t(r)])) << "row " << r << " groups " << groups;
                }
              }
            }
    }
  }
}

// Through matmul on two threads, the pieces the pool deals out follow the wide streaming's
// groups (its granule) and the bits stay those of one group at a time.
TEST(GemmQ8Interleaved, WideStreamingOnThePoolChangesNoBits) {
  if (!ops::int8_kernel_reads(DType::Q8_0_R16)) GTEST_SKIP() << "no int8 kernel for interleaved rows on this CPU";
  ThreadPool pool(2);
  for (DType t : {DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q5_K_R16, DType::Q6_K_R16}) {
    const int64_t in = 512, out = 16 * 37;
    BlockWeights w = make_weights(t, out, in, 71);
    std::vector<float> x = test::random_activations(in, 72), plain(static_cast<size_t>(out)), pooled(static_cast<size_t>(out));
    ops::Q8Activations a;
    ops::quantize_activations(x.data(), 1, in, a);
    ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, plain.data(), out, {1, 0});
    ops::MatmulContext ctx;
    ctx.pool = &pool;
    ctx.int8_activations = true;
    ctx.decode = {1, 0, 1024, 4};
    ops::matmul(x.data(), 1, w.view, pooled.data(), ctx);
    EXPECT_EQ(0, std::memcmp(plain.data(), pooled.data(), plain.size() * 4)) << dtype_name(t);
  }
}

// A stream's prefetch target: inside its own group as asked; past the group's end, in the group
// that stream reads next (side_by_side groups on), skipping the groups the other streams read.
TEST(GemmQ8Dispatch, StreamPrefetchSkipsTheOtherStreamsGroups) {
  EXPECT_EQ(ops::stream_prefetch_offset(100, 1000, 4), 100u);
  EXPECT_EQ(ops::stream_prefetch_offset(1100, 1000, 4), 4100u);   // group g + 4, 100 bytes in
  EXPECT_EQ(ops::stream_prefetch_offset(2100, 1000, 2), 4100u);   // two groups past: g + 4
  EXPECT_EQ(ops::stream_prefetch_offset(1100, 1000, 1), 1100u);   // one stream: straight on
}

// Groups longer than wide_group_bytes stream wide_groups side by side; others `groups`.
TEST(GemmQ8Dispatch, LongGroupsTakeTheWideStreaming) {
  const ops::DecodeStreaming s{1, 0, 48u << 10, 4};
  EXPECT_EQ(ops::decode_groups_for(s, 55296), 4);  // Q4_0, in 6144: 54 KiB a group
  EXPECT_EQ(ops::decode_groups_for(s, 49152), 1);  // exactly the L1d: not longer
  EXPECT_EQ(ops::decode_groups_for(s, 13824), 1);  // Q4_0, in 1536
  EXPECT_EQ(ops::decode_groups_for(ops::DecodeStreaming{2, 0}, 1u << 20), 2);  // no rule: groups
}

// The read pass that decode is held against reads every way the plan streams, without the plan's
// software prefetch too, and one plain stream per thread whatever the plan: a prefetch distance
// or a stream count that slows plain reads would otherwise lower the ceiling and flatter decode.
TEST(GemmQ8Dispatch, ReadPassReadsWithAndWithoutThePlansPrefetch) {
  DeviceInfo d = presets::avx2_laptop();
  d.vendor = "GenuineIntel";  // 4 streams, prefetch 4 KiB ahead
  const std::vector<ops::ReadPassWay> intel = ops::read_pass_ways(ops::plan_decode_streaming(d).streaming);
  auto has = [](const std::vector<ops::ReadPassWay>& ways, int streams, uint64_t prefetch) {
    return std::any_of(ways.begin(), ways.end(),
                       [&](const ops::ReadPassWay& w) { return w.streams == streams && w.prefetch_bytes == prefetch; });
  };
  EXPECT_TRUE(has(intel, 4, 4096));
  EXPECT_TRUE(has(intel, 4, 0));
  // Zen 4/5 (AVX-512): 1 stream, 4 past the L1d, no prefetch.
  const DeviceInfo zen4 = presets::with_caches(presets::zen4(), 32u << 10, 1u << 20);
  const std::vector<ops::ReadPassWay> amd = ops::read_pass_ways(ops::plan_decode_streaming(zen4).streaming);
  EXPECT_TRUE(has(amd, 1, 0));
  EXPECT_TRUE(has(amd, 4, 0));
  for (const ops::ReadPassWay& w : amd) EXPECT_EQ(w.prefetch_bytes, 0u);  // nothing the plan never does
  // Zen 2/3 (AVX2 only): 2 streams with prefetch 4 KiB ahead, and each without the prefetch.
  const std::vector<ops::ReadPassWay> zen3 = ops::read_pass_ways(ops::plan_decode_streaming(presets::zen3()).streaming);
  EXPECT_TRUE(has(zen3, 1, 0));
  EXPECT_TRUE(has(zen3, 2, 4096));
  EXPECT_TRUE(has(zen3, 2, 0));
  // A plan that streams 4 groups everywhere is still held against one plain stream.
  const std::vector<ops::ReadPassWay> four = ops::read_pass_ways(ops::DecodeStreaming{4, 0});
  EXPECT_TRUE(has(four, 1, 0));
  EXPECT_TRUE(has(four, 4, 0));
  EXPECT_EQ(four.size(), 2u);  // each way once
}

TEST(GemmQ8Dispatch, DecodeStreamingIsPlannedPerVendorWithAReason) {
  DeviceInfo d = presets::avx2_laptop();
  d.vendor = "GenuineIntel";
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.prefetch_bytes, 4096u);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.groups, 4);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.warm_bytes, 0u);  // unmeasured there
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.few_prefetch_bytes, 2048u);  // a few streams together
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.few_groups, 2);
  EXPECT_NE(ops::plan_decode_streaming(d).reason.find("Intel"), std::string::npos);
  EXPECT_FALSE(ops::plan_attention(d).bf16_dots);  // VDPBF16PS slower than FMA there
  EXPECT_NE(ops::plan_attention(d).reason.find("Intel"), std::string::npos);
  EXPECT_FALSE(test::context_for(d, {.bf16_compute = true}).attention_bf16_dots);
  d.vendor = "AuthenticAMD";
  // An AMD core takes VDPBF16PS only where it has it (Zen 4/5), never on an AVX2-only Zen 3.
  EXPECT_FALSE(ops::plan_attention(d).bf16_dots);
  EXPECT_NE(ops::plan_attention(d).reason.find("no confirmed AVX512_BF16"), std::string::npos);
  EXPECT_TRUE(ops::plan_attention(presets::zen4()).bf16_dots);
  EXPECT_TRUE(test::context_for(presets::zen4(), {.bf16_compute = true}).attention_bf16_dots);
  // Without AVX-512 (Zen 2/3) the 256-bit int8 kernels read 2 streams per thread, 4 KiB ahead.
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.groups, 2);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.prefetch_bytes, 4096u);
  EXPECT_NE(ops::plan_decode_streaming(d).reason.find("Zen 2/3"), std::string::npos);
  d = presets::zen4();  // the AVX-512 AMD cores' plan
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.prefetch_bytes, 0u);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.groups, 1);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.few_prefetch_bytes, 8192u);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.few_groups, 1);
  d.caches.l1d_bytes = 32u << 10;  // groups past the L1d: 4 side by side
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.wide_group_bytes, 32u << 10);
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.wide_groups, 4);
  const nlohmann::json amd = ops::decode_plan_to_json(ops::plan_decode_streaming(d));
  EXPECT_EQ(amd.at("wide_group_bytes"), 32 << 10);
  EXPECT_EQ(amd.at("wide_streams_per_thread"), 4);
  d.caches.l2_bytes = 2u << 20;  // workers warm a quarter of their L2
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.warm_bytes, 512u << 10);
  EXPECT_EQ(ops::decode_plan_to_json(ops::plan_decode_streaming(d)).at("warm_bytes"), 512 << 10);
  EXPECT_EQ(ops::describe_decode_streaming(ops::plan_decode_streaming(d).streaming),
            "1 stream per thread (4 where a 16-row group exceeds 32 KiB), no prefetch, workers read 512 KiB of the next "
            "product ahead");
  EXPECT_NE(ops::plan_decode_streaming(d).reason.find("AMD"), std::string::npos);
  d.vendor = "SomeoneElse";
  EXPECT_EQ(ops::plan_decode_streaming(d).streaming.prefetch_bytes, 0u);
  EXPECT_NE(ops::plan_decode_streaming(d).reason.find("SomeoneElse"), std::string::npos);
  const ops::MatmulContext c = test::context_for(d, {.int8_activations = true});
  EXPECT_EQ(c.decode.prefetch_bytes, 0u);
  EXPECT_EQ(c.panel_in, 1536);
  EXPECT_GE(c.panel_rows, 4);
  d.vendor = "GenuineIntel";
  const nlohmann::json j = ops::decode_plan_to_json(ops::plan_decode_streaming(d));  // g4 device/bench --json
  EXPECT_EQ(j.at("streams_per_thread"), 4);
  EXPECT_EQ(j.at("prefetch_bytes"), 4096);
  EXPECT_EQ(j.at("few_streams_prefetch_bytes"), 2048);
  EXPECT_EQ(j.at("few_streams_groups_per_thread"), 2);
  EXPECT_NE(j.at("reason").get<std::string>().find("Intel"), std::string::npos);
  if (ops::gemm_q8_avx512()) {  // the description names the kernel that runs (AVX-512's own few-stream pairs)
    const std::string desc = ops::describe_matmul(test::context_for(d, {.int8_activations = true}), DType::Q4_0_R16);
    EXPECT_NE(desc.find("4 streams per thread, prefetch 4 KiB ahead"), std::string::npos) << desc;
    EXPECT_NE(desc.find("2-8 streams decoding together: one pass, 2 row groups side by side per thread, prefetch 2 "
                        "KiB ahead"),
              std::string::npos)
        << desc;
    // The AVX-512 K-quant kernels prefetch three quarters of a super-block column ahead whatever
    // distance the plan names (Zen 2/3: 4 KiB), and nothing where it prefetches nothing (Zen 4/5).
    const ops::MatmulContext amd_ctx = test::context_for(presets::zen3(), {.int8_activations = true});
    const std::string q6 = ops::describe_matmul(amd_ctx, DType::Q6_K_R16);
    EXPECT_NE(q6.find("prefetch 2520 B ahead"), std::string::npos) << q6;
    EXPECT_NE(ops::describe_matmul(amd_ctx, DType::Q4_K_R16).find("prefetch 1728 B ahead"), std::string::npos);
    const ops::MatmulContext zen4_ctx = test::context_for(presets::zen4(), {.int8_activations = true});
    const std::string q4k = ops::describe_matmul(zen4_ctx, DType::Q4_K_R16);
    EXPECT_NE(q4k.find("KiB), no prefetch"), std::string::npos) << q4k;
    const std::string q6k = ops::describe_matmul(zen4_ctx, DType::Q6_K_R16);  // Q6_K: into L2, 2 columns on
    EXPECT_NE(q6k.find("(4 where a 16-row group exceeds 32 KiB), prefetch 6720 B ahead into L2, workers"),
              std::string::npos)
        << q6k;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemmQ8,
                         ::testing::Combine(::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q8_0_R16, DType::Q4_0_R16,
                                                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_K_R16,
                                                              DType::Q5_K_R16, DType::Q6_K_R16),
                                            kTiers),
                         [](const ::testing::TestParamInfo<std::tuple<DType, Int8Dot>>& p) {
                           return format_and_tier(std::get<0>(p.param), std::get<1>(p.param));
                         });

// The 256-bit tiers are written to compute, per output, the AVX512_VNNI kernels' exact int32 sums
// and f32 steps in the same order (gemm_q8_avx2.h): on the interleaved layouts every tier the CPU
// has gives the same bits for decode, a few streams and prefill. Needs two tiers on this CPU.
TEST(GemmQ8Tiers, InterleavedLayoutsGiveTheSameBitsOnEveryTier) {
  std::vector<Int8Dot> tiers;
  for (Int8Dot t : {Int8Dot::Avx2, Int8Dot::AvxVnni, Int8Dot::Avx512Vnni})
    if (host_cpu().runs_int8_tier(t)) tiers.push_back(t);
  if (tiers.size() < 2)
    GTEST_SKIP() << "one int8 tier on this CPU (" << int8_dot_name(host_cpu().int8_dot()) << "): nothing to compare";
  for (DType t : {DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q5_K_R16, DType::Q6_K_R16})
    for (int64_t T : {1, 5, 13}) {
      const int64_t in = 512, out = 48;
      BlockWeights w = make_weights(t, out, in, unsigned(T));
      std::vector<float> x = test::random_activations(T * in, unsigned(T + 1));
      ops::Q8Activations a;
      ops::quantize_activations(x.data(), T, in, a);
      std::vector<std::vector<float>> got;
      for (Int8Dot tier : tiers) {
        const ForcedTier forced(tier);
        got.emplace_back(size_t(T * out), NAN);
        ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, got.back().data(), out);
      }
      for (size_t i = 1; i < got.size(); ++i)
        EXPECT_EQ(0, std::memcmp(got[0].data(), got[i].data(), got[0].size() * 4))
            << dtype_name(t) << " T " << T << ": " << int8_dot_name(tiers[0]) << " vs " << int8_dot_name(tiers[i]);
    }
}

// The tier switch: only tiers the CPU confirmed (they are not nested: AVX512_VNNI without
// AVX-VNNI on Zen 4 and Ice Lake), each refused by name otherwise.
TEST(GemmQ8Tiers, ForcingATierTheCpuLacksIsRefusedByName) {
  const Int8Dot host = host_cpu().int8_dot();
  const Int8Dot before = ops::int8_kernel_tier();  // G4_INT8_KERNELS may have lowered it from host's
  int refused = 0;
  for (Int8Dot t : {Int8Dot::Avx2, Int8Dot::AvxVnni, Int8Dot::Avx512Vnni, Int8Dot::NeonDot}) {
    if (host_cpu().runs_int8_tier(t)) continue;
    ++refused;
    try {
      ops::force_int8_kernel_tier(t);
      ADD_FAILURE() << "forced " << int8_dot_name(t) << ", which the CPU lacks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(int8_dot_name(t))), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(int8_dot_name(host))), std::string::npos) << e.what();
    }
    EXPECT_EQ(ops::int8_kernel_tier(), before);
  }
  if (refused == 0) GTEST_SKIP() << "this CPU runs every int8 tier";
}

TEST(GemmQ8Dispatch, WithoutTheRequestQuantizedWeightsKeepF32Activations) {
  const int64_t T = 2, in = 64, out = 70;
  BlockWeights w = make_weights(DType::Q8_0, out, in, 31);
  std::vector<float> x = test::random_activations(T * in, 32);
  ops::MatmulContext ctx;  // int8_activations = false
  EXPECT_FALSE(ops::uses_int8_kernel(ctx));
  EXPECT_EQ(ops::describe_matmul(ctx, DType::Q8_0).find("VPDPBUSD"), std::string::npos);
  std::vector<float> got(size_t(T * out)), want(size_t(T * out));
  ops::matmul(x.data(), T, w.view, got.data(), ctx);
  ref::matmul(x.data(), T, test::matrix_view(DType::F32, out, in, w.values.data()), want.data());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-4f);
}

// Interleaved weights without the int8 kernel (e.g. --compute f32 after they were interleaved)
// take the reference loops, which read each row out of its group: f32 activations, exact values.
TEST(GemmQ8Dispatch, InterleavedWeightsWithoutTheKernelUseTheReferenceLoops) {
  for (DType t : {DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q5_K_R16, DType::Q6_K_R16}) {
    const int64_t T = 3, in = dtype_block_size(interleave_base(t)) == 256 ? 256 : 96, out = 48;
    BlockWeights w = make_weights(t, out, in, 41);
    std::vector<float> x = test::random_activations(T * in, 42);
    ops::MatmulContext ctx;  // int8_activations = false
    EXPECT_NE(ops::describe_matmul(ctx, t).find("reference loops"), std::string::npos) << ops::describe_matmul(ctx, t);
    std::vector<float> got(size_t(T * out)), want(size_t(T * out));
    ops::matmul(x.data(), T, w.view, got.data(), ctx);
    ref::matmul(x.data(), T, test::matrix_view(DType::F32, out, in, w.values.data()), want.data());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-4f) << dtype_name(t) << " " << k;
  }
}


// --- AMX-INT8 tiles (gemm_q8_tiles.h) --------------------------------------------------------

// The CPU's tiles where the probe, self-test and kernel check confirmed them; else the model.
ops::Int8Tiles int8_tile_unit() { return ops::amx_int8_kernel_usable() ? ops::Int8Tiles::Amx : ops::Int8Tiles::Emulated; }

// The tiles' epilogue is AVX-512 (the AVX512_VNNI kernel's), on the model as on the CPU's tiles.
class Int8Tiles : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!ops::gemm_q8_avx512()) GTEST_SKIP() << "the tiles' epilogue needs the avx512-vnni tier, this CPU's is "
                                             << int8_dot_name(ops::int8_kernel_tier());
  }
};

// Every output bit-identical to the VPDPBUSD kernel (the decode kernel, and an implementation
// of the same formula that shares no code with the tiles) for full and partial token tiles, odd
// and even block counts, every token block, and each token alone through VPDPBUSD.
TEST_P(Int8Tiles, BitIdenticalToTheVpdpbusdKernel) {
  const DType t = GetParam();
  const ops::Int8Tiles unit = int8_tile_unit();
  for (int64_t in : {32, 96, 256}) {
    for (int64_t T : {2, 16, 17, 37, 70}) {
      SCOPED_TRACE("in " + std::to_string(in) + " T " + std::to_string(T));
      const int64_t out = 48;
      BlockWeights w = make_weights(t, out, in, unsigned(3 * in + T));
      std::vector<float> x = test::random_activations(T * in, unsigned(5 * in + T));
      ops::Q8Activations a;
      ops::quantize_activations(x.data(), T, in, a, ops::kQ8Panels | ops::kQ8TokenTiles);
      std::vector<float> want(size_t(T * out), -1.0f);
      ops::gemm_q8_rows(a, w.bytes.data(), t, 0, out, want.data(), out);
      for (int64_t block : {16, 32, 64})
        for (int64_t chunk : {0, 32, 64}) {  // column chunks carry the accumulators on through y
          std::vector<float> got(size_t(T * out), NAN);
          ops::gemm_q8_tiles(unit, a, w.bytes.data(), t, 0, out, got.data(), out, {block, chunk});
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token block " << block << ", chunk " << chunk;
        }
      std::vector<float> split(size_t(T * out), NAN);  // row ranges of whole groups, as the pool cuts them
      ops::gemm_q8_tiles(unit, a, w.bytes.data(), t, 0, 16, split.data(), out);
      ops::gemm_q8_tiles(unit, a, w.bytes.data(), t, 16, out, split.data(), out);
      ASSERT_EQ(0, std::memcmp(split.data(), want.data(), split.size() * 4));
      for (int64_t tt : {int64_t(0), T - 1}) {
        ops::Q8Activations one;
        ops::quantize_activations(&x[size_t(tt * in)], 1, in, one);
        std::vector<float> alone(static_cast<size_t>(out));
        ops::gemm_q8_rows(one, w.bytes.data(), t, 0, out, alone.data(), out);
        ASSERT_EQ(0, std::memcmp(alone.data(), &want[size_t(tt * out)], size_t(out) * 4)) << "token " << tt;
      }
    }
  }
}

// Against the reference loop on the dequantized weights and activations: f32 rounding only.
TEST_P(Int8Tiles, MatchTheReferenceOnTheQuantizedActivations) {
  const DType t = GetParam();
  const int64_t T = 33, in = 1536, out = 32;
  BlockWeights w = make_weights(t, out, in, 61);
  std::vector<float> x = test::random_activations(T * in, 62);
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), T, in, a, ops::kQ8TokenTiles);
  std::vector<float> got(size_t(T * out), NAN);
  ops::gemm_q8_tiles(int8_tile_unit(), a, w.bytes.data(), t, 0, out, got.data(), out);
  expect_near_dequantized(a, w, out, got);
}

// Through ops::matmul on the pool: prefill on the tiles, decode on VPDPBUSD, the same bits; the
// context says which unit runs and the bench's peak is the tile instruction's.
TEST_P(Int8Tiles, MatmulPrefillOnTilesEqualsEachTokenAlone) {
  const DType t = GetParam();
  const int64_t T = 40, in = 256, out = 64;
  BlockWeights w = make_weights(t, out, in, 71);
  std::vector<float> x = test::random_activations(T * in, 72);
  ThreadPool pool(2);
  ops::MatmulContext ctx;
  ctx.pool = &pool;
  ctx.int8_activations = true;
  ctx.int8_tiles = ops::Int8Tiles::Emulated;
  ASSERT_TRUE(ops::uses_int8_tiles(ctx, t, T));
  // Decode and a few streams together stay on VPDPBUSD's streaming kernels.
  for (int64_t few = 1; few <= ops::kFewTokens; ++few) EXPECT_FALSE(ops::uses_int8_tiles(ctx, t, few)) << few;
  EXPECT_TRUE(ops::uses_int8_tiles(ctx, t, ops::kFewTokens + 1));
  EXPECT_EQ(ops::mac_unit_of(ctx, t), MacUnit::Int8Tile);
  EXPECT_NE(ops::describe_matmul(ctx, t).find("software model of AMX-INT8"), std::string::npos) << ops::describe_matmul(ctx, t);
  std::vector<float> batched(size_t(T * out), NAN);
  ops::matmul(x.data(), T, w.view, batched.data(), ctx);
  for (int64_t tt = 0; tt < T; ++tt) {
    std::vector<float> alone(size_t(out), NAN);
    ops::matmul(&x[size_t(tt * in)], 1, w.view, alone.data(), ctx);  // one token: VPDPBUSD
    ASSERT_EQ(0, std::memcmp(alone.data(), &batched[size_t(tt * out)], size_t(out) * 4)) << "token " << tt;
  }
  ctx.int8_tiles = ops::Int8Tiles::None;
  std::vector<float> vnni(size_t(T * out), NAN);
  ops::matmul(x.data(), T, w.view, vnni.data(), ctx);
  EXPECT_EQ(0, std::memcmp(vnni.data(), batched.data(), batched.size() * 4));
  EXPECT_EQ(ops::mac_unit_of(ctx, t), MacUnit::Int8Dot);
}

INSTANTIATE_TEST_SUITE_P(Formats, Int8Tiles, ::testing::Values(DType::Q8_0_R16, DType::Q4_0_R16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

TEST(Int8TilesDispatch, RefuseWhatTheTilesDoNotTake) {
  if (!ops::gemm_q8_avx512()) GTEST_SKIP() << "the tiles' epilogue needs the avx512-vnni tier";
  BlockWeights w = make_weights(DType::Q8_0_R16, 32, 64, 81), rows = make_weights(DType::Q8_0, 32, 64, 82);
  std::vector<float> x = test::random_activations(3 * 64, 83), y(3 * 32);
  ops::Q8Activations a;
  ops::quantize_activations(x.data(), 3, 64, a, ops::kQ8TokenTiles);
  const auto em = ops::Int8Tiles::Emulated;
  EXPECT_NO_THROW(ops::gemm_q8_tiles(em, a, w.bytes.data(), DType::Q8_0_R16, 0, 32, y.data(), 32));
  EXPECT_THROW(ops::gemm_q8_tiles(em, a, rows.bytes.data(), DType::Q8_0, 0, 32, y.data(), 32), Error);  // row-major
  EXPECT_THROW(ops::gemm_q8_tiles(em, a, w.bytes.data(), DType::Q8_0_R16, 0, 24, y.data(), 32), Error);  // splits a group
  EXPECT_THROW(ops::gemm_q8_tiles(em, a, w.bytes.data(), DType::Q8_0_R16, 0, 32, y.data(), 32, {24, 0}), Error);  // token block
  EXPECT_THROW(ops::gemm_q8_tiles(em, a, w.bytes.data(), DType::Q8_0_R16, 0, 32, y.data(), 32, {16, 48}), Error);  // chunk
  EXPECT_THROW(ops::gemm_q8_tiles(ops::Int8Tiles::None, a, w.bytes.data(), DType::Q8_0_R16, 0, 32, y.data(), 32), Error);
  try {
    ops::quantize_activations(x.data(), 3, 64, a, ops::kQ8Panels);  // no token tiles: refused, not read past the end
    ops::gemm_q8_tiles(em, a, w.bytes.data(), DType::Q8_0_R16, 0, 32, y.data(), 32);
    ADD_FAILURE() << "activations without the token-tile layout were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token-tile layout"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ops::int8_tiles_take(DType::Q4_K_R16));
}

TEST(Int8TilesDispatch, KernelCheckPassesOnTheModelAndSaysWhyTheCpuTilesAreNotUsed) {
  if (!ops::gemm_q8_avx512()) GTEST_SKIP() << "the tiles' epilogue needs the avx512-vnni tier";
  const ops::TileKernelCheck model = ops::check_q8_tiles(ops::Int8Tiles::Emulated);
  EXPECT_TRUE(model.run);
  EXPECT_TRUE(model.passed) << model.detail;
  EXPECT_NE(model.detail.find("bit-identical"), std::string::npos) << model.detail;
  const ops::TileKernelCheck& cpu = ops::amx_int8_kernel_check();
  if (!host_cpu().amx_int8_usable()) {
    EXPECT_FALSE(cpu.run);
    EXPECT_FALSE(cpu.passed);
    EXPECT_NE(cpu.detail.find("did not confirm AMX-INT8"), std::string::npos) << cpu.detail;
    EXPECT_EQ(test::context_for(host_cpu(), {.int8_activations = true}).int8_tiles, ops::Int8Tiles::None);
    // A preset that describes AMX does not turn on tiles this CPU lacks.
    EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {.int8_activations = true}).int8_tiles,
              ops::Int8Tiles::None);
  } else {
    EXPECT_TRUE(cpu.passed) << cpu.detail;
    EXPECT_EQ(test::context_for(host_cpu(), {.int8_activations = true}).int8_tiles, ops::Int8Tiles::Amx);
  }
  // Never without int8 activations, nor on a device whose AMX the OS refused or whose self-test failed.
  EXPECT_EQ(test::context_for(presets::sapphire_rapids(), {.bf16_compute = true}).int8_tiles, ops::Int8Tiles::None);
  EXPECT_EQ(test::context_for(presets::sapphire_rapids_amx_refused(), {.int8_activations = true}).int8_tiles,
            ops::Int8Tiles::None);
  EXPECT_EQ(test::context_for(presets::sapphire_rapids_amx_selftest_failed(), {.int8_activations = true}).int8_tiles,
            ops::Int8Tiles::None);
}

// Blocking: column chunks of equal whole blocks whose group (~32 bytes a column) takes at most an
// eighth of the budget; token blocks of as many 16-token tiles as fit the rest, 1 to 32.
TEST(Int8TilesDispatch, BlockingFitsItsBudget) {
  auto is = [](ops::Int8TileBlocking b, int64_t tokens, int64_t columns) {
    return b.token_block == tokens && b.k_chunk == columns;
  };
  EXPECT_TRUE(is(ops::int8_tiles_blocking(1536, 0), 16, 1536));            // no budget: one tile, all columns
  EXPECT_TRUE(is(ops::int8_tiles_blocking(1536, 1u << 30), 32 * 16, 1536));  // at most 32 tiles
  // 1 MiB: 1536 whole (48 KiB a group), 32 tiles; E2B's down_proj, 12288 wide, in 3 chunks of 4096
  // (128 KiB a group), 14 tiles of 64 KiB beside it (whole: 3 tiles beside 384 KiB).
  EXPECT_TRUE(is(ops::int8_tiles_blocking(1536, 1u << 20), 32 * 16, 1536));
  EXPECT_TRUE(is(ops::int8_tiles_blocking(12288, 1u << 20), 14 * 16, 4096));
  for (int64_t in : {256, 1536, 6144, 12288}) {
    const ops::Int8TileBlocking b = ops::int8_tiles_blocking(in, 512 * 1024);
    EXPECT_EQ(b.token_block % 16, 0);
    EXPECT_EQ(b.k_chunk % 32, 0);
    EXPECT_LE(uint64_t(b.token_block * b.k_chunk + 32 * b.k_chunk), 512u * 1024) << in;
  }
}

}  // namespace
}  // namespace g4
