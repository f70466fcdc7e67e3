// The fast compute paths through the cached forward pass: policy compute = bf16 (VDPBF16PS
// weight products) and policy activations = q8 (int8 activations on VPDPBUSD for Q8_0/Q4_0
// weights):
//  - against the f32 reference loops on the same weights, within a measured bound;
//  - batching, chunking and joining/leaving change nothing, bit for bit: each sequence's
//    logits inside a mixed batch equal the same sequence run alone one token at a time.
// The same exactness is checked for the f32 SIMD path, which must hold it just as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/synth.h"
#include "model/requantize.h"
#include "model/weight_interleave.h"
#include "model/weight_placement.h"
#include "ops/attention/attention_bf16.h"
#include "ops/attention/attention_int8.h"
#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_bf16_256.h"
#include "ops/matmul/gemm_q8.h"
#include "ops/matmul/matmul.h"
#include "platform/row_interleave.h"
#include "engine/cache_feed.h"
#include "kquant_wide_config.h"
#include "test_util.h"

namespace g4 {
namespace {

using test::random_tokens;

class Bf16Compute : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    for (const char* p : {"tiny-e", "tiny-moe", "tiny-e32"}) {
      // tiny-e32: tiny-e with head dims of 32 and 64, so every layer's attention fits the tiles
      // (tiny-moe's sliding layers, head dim 16, do not: a model with both kernels).
      ModelConfig c = preset_config(std::string(p) == "tiny-e32" ? "tiny-e" : p);
      if (std::string(p) == "tiny-e32") c.head_dim = 32, c.global_head_dim = 64;
      c.sliding_window = 4;
      c.finalize();
      SynthOptions o;
      o.dtype = DType::BF16;
      write_synth_checkpoint(c, o, *dir_ / p);
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::unique_ptr<Model> model(const std::string& p) { return load_model(*dir_ / p); }
  // As generate/bench/serve load it for the bf16 kernel: the streamed matrices copied into
  // memory g4 owns and interleaved 16 rows at a time (BF16_R16).
  static std::unique_ptr<Model> interleaved(const std::string& p) {
    auto m = model(p);
    ThreadPool pool(2);
    place_weights(*m, WeightMemory::Huge, &pool);
    const InterleaveReport ir = interleave_weights(*m, &pool, InterleaveFor{.int8 = false, .bf16 = true});
    EXPECT_GT(ir.tensors, 0) << p << ": nothing was interleaved";
    EXPECT_EQ(m->weights.layers[0].q_proj->dtype, DType::BF16_R16) << p;
    EXPECT_EQ(m->weights.lm_head, m->weights.embed_tokens) << p << ": the tied head came untied";
    return m;
  }
  static test::TempDir* dir_;
};
test::TempDir* Bf16Compute::dir_ = nullptr;

// One sequence alone, one token per step.
std::vector<float> alone(const Model& m, const std::vector<int>& tokens, const blocks::Exec& ex,
                         KvDType kv_type = KvDType::F32) {
  KvCache kv(m.config, {kv_type, 4, 4096});
  return test::feed_chunked(m, kv, kv.add_sequence(), tokens, 1, ex);
}

// Four sequences joining at different steps (sequence i at step 2i), prefilling 5 tokens at a
// time, then decoding together; logits per sequence in position order.
std::vector<std::vector<float>> batched(const Model& m, const std::vector<std::vector<int>>& streams, const blocks::Exec& ex,
                                        KvDType kv_type = KvDType::F32) {
  KvCache kv(m.config, {kv_type, 4, 4096});
  return test::feed_batched(m, kv, streams, ex,
                            [](size_t i, size_t fed, int step) -> size_t { return step < int(2 * i) ? 0 : fed == 0 ? 5 : 1; });
}

// What one batching check runs: the matmul policies, the cache, the tiles (software models here)
// and how long the streams are.
struct BatchingCase {
  bool bf16_compute = false;
  bool int8_activations = false;
  KvDType kv_type = KvDType::F32;
  ops::Bf16Tiles bf16_tiles = ops::Bf16Tiles::None;
  ops::Int8Tiles int8_tiles = ops::Int8Tiles::None;
  ops::Bf16Tiles attention_tiles = ops::Bf16Tiles::None;
  size_t base_len = 9;  // tokens of the first stream; each next one has 6 more
};

void expect_batching_is_exact(const Model& m, const BatchingCase& c) {
  ThreadPool pool(2);
  ops::MatmulContext mm{.pool = &pool, .panel_rows = 4, .bf16_compute = c.bf16_compute,
                        .int8_activations = c.int8_activations};
  mm.bf16_tiles = c.bf16_tiles;
  mm.int8_tiles = c.int8_tiles;
  mm.attention_tiles = c.attention_tiles;
  blocks::Exec ex{&mm};
  ex.attention_parallel_min_fmas = 0;  // every layer's attention on the pool, in slices of 8 keys merged
  ex.attention_slice = 8;
  std::vector<std::vector<int>> streams;
  for (size_t i = 0; i < 4; ++i) streams.push_back(random_tokens(c.base_len + 6 * i, m.config.vocab_size, unsigned(40 + i)));
  const auto together = batched(m, streams, ex, c.kv_type);
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto one = alone(m, streams[i], ex, c.kv_type);
    ASSERT_EQ(one.size(), together[i].size());
    EXPECT_EQ(0, std::memcmp(one.data(), together[i].data(), one.size() * sizeof(float)))
        << "sequence " << i
        << (c.bf16_compute ? " (bf16 compute)" : c.int8_activations ? " (int8 activations)" : " (f32 SIMD)")
        << ": batched logits differ from alone";
  }
}

TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheF32SimdPath) {
  for (const char* p : {"tiny-e", "tiny-moe"}) expect_batching_is_exact(*model(p), {});  // the defaults: f32 SIMD
}

// The f32 kernel over a rounded cache (bf16, f16, int8): the step's own rows are rounded as the
// cache stores them too, so chunking changes no bit on this path either.
TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheF32KernelOverRoundedCaches) {
  for (KvDType t : {KvDType::BF16, KvDType::F16, KvDType::Int8})
    for (const char* p : {"tiny-e", "tiny-moe"}) {
      SCOPED_TRACE(std::string(p) + " kv " + kv_dtype_name(t));
      expect_batching_is_exact(*model(p), {.kv_type = t});
    }
}

TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheBf16Kernel) {
  if (!ops::gemm_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  for (const char* p : {"tiny-e", "tiny-moe"}) expect_batching_is_exact(*model(p), {.bf16_compute = true});
}

TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheInterleavedBf16Kernel) {
  if (!ops::gemm_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  for (const char* p : {"tiny-e", "tiny-moe"}) expect_batching_is_exact(*interleaved(p), {.bf16_compute = true});
}

// Compute f32 on interleaved BF16 weights: on AVX2 CPUs the products take BF16_R16 with f32
// activations on FMA (ops/matmul/gemm_bf16_256.h), the layout bench, generate and serve give them
// there; forced where the CPU also has AVX-512 (ops::matmul leaves it to the AVX-512 kernels).
// Batching and chunking change no bit, and the logits stay at f32 rounding from the reference.
TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheInterleavedF32FmaKernel) {
  if (!ops::gemm_bf16_256_supported()) GTEST_SKIP() << "no AVX2 + FMA + F16C on this CPU";
  ops::force_gemm_bf16_256(true);
  struct Unforce {
    ~Unforce() { ops::force_gemm_bf16_256(std::nullopt); }
  } unforce;
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    const auto m = interleaved(p);
    expect_batching_is_exact(*m, {});
    ThreadPool pool(2);
    const ops::MatmulContext mm{.pool = &pool, .panel_rows = 4};
    EXPECT_TRUE(ops::uses_bf16_256_kernel(mm));
    const auto tokens = random_tokens(24, m->config.vocab_size, 7);
    const auto got = alone(*m, tokens, blocks::Exec{&mm});
    const auto ref = forward_reference(*m, tokens);
    const float worst = test::max_abs_diff(got.data(), ref.data(), got.size());
    std::printf("[ f32 fma ] %s interleaved: max |delta logit| %.2e against the reference loops\n", p, double(worst));
    EXPECT_LT(worst, 1e-3f) << p;
  }
}

// On AMX-BF16 tiles (here the software model of them, where the CPU has none): the matrices in
// whole steps of 32 columns run on the tiles for every token count, the others (tiny-e's
// per-layer projection, 16 wide) on VDPBF16PS; batching and chunking still change no bit.
TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheTiles) {
  if (!ops::gemm_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  for (const char* p : {"tiny-e", "tiny-moe"})
    expect_batching_is_exact(*interleaved(p), {.bf16_compute = true, .bf16_tiles = ops::Bf16Tiles::Emulated});
}

// Interleaving re-orders bytes and nothing else: the f32 reference loops (which read each row
// out of its group, the tied embedding's gathers included) give the same logits bit for bit.
TEST_F(Bf16Compute, InterleavingChangesNoValue) {
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    const auto tokens = random_tokens(12, model(p)->config.vocab_size, 3);
    const auto rows = forward_reference(*model(p), tokens);
    const auto groups = forward_reference(*interleaved(p), tokens);
    ASSERT_EQ(rows.size(), groups.size());
    EXPECT_EQ(0, std::memcmp(rows.data(), groups.data(), rows.size() * sizeof(float))) << p;
  }
}

// With a bf16 KV cache the attention runs on the bf16 kernel too (ops/attention/attention_bf16.h), and the
// step's own rows are rounded as the cache stores them: prefilling 5 rows at once and decoding
// one at a time still give the same bits.
TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheBf16AttentionKernel) {
  if (!ops::attention_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  for (const char* p : {"tiny-e", "tiny-moe"})
    expect_batching_is_exact(*model(p), {.bf16_compute = true, .kv_type = KvDType::BF16});
}

// Attention on AMX-BF16 tiles (here the software model of them, where the CPU has none) for every
// row of the layers that fit, decode and prefill alike: prefilling 5 rows at once and decoding one
// at a time still give the same bits, tiny-moe with its sliding layers on VDPBF16PS beside.
TEST_F(Bf16Compute, BatchingAndChunkingAreBitExactOnTheAttentionTiles) {
  if (!ops::attention_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  // Streams of 40-58 tokens: over a few keys the two kernels' sums mostly round to the same bits
  // (the weights are rounded to bf16), so a prefill on tiles beside a decode on VDPBF16PS would
  // pass with the default 9-27.
  for (const char* p : {"tiny-e32", "tiny-moe"})
    expect_batching_is_exact(*model(p), {.bf16_compute = true,
                                         .kv_type = KvDType::BF16,
                                         .attention_tiles = ops::Bf16Tiles::Emulated,
                                         .base_len = 40});
  // As an AMX-BF16 CPU runs it: the interleaved weights' products on tiles too.
  expect_batching_is_exact(*interleaved("tiny-e32"), {.bf16_compute = true,
                                                      .kv_type = KvDType::BF16,
                                                      .bf16_tiles = ops::Bf16Tiles::Emulated,
                                                      .attention_tiles = ops::Bf16Tiles::Emulated,
                                                      .base_len = 40});
}

TEST_F(Bf16Compute, AttentionKernelFollowsPolicyAndCacheType) {
  auto m = model("tiny-e");
  ThreadPool pool(2);
  ops::MatmulContext bf{.pool = &pool, .panel_rows = 4, .bf16_compute = true};
  ops::MatmulContext f32{.pool = &pool, .panel_rows = 4, .bf16_compute = false};
  const blocks::Exec on_bf{&bf}, on_f32{&f32}, reference{};
  KvCache kv_bf(m->config, {KvDType::BF16, 4, 64}), kv_f32(m->config, {KvDType::F32, 4, 64}),
      kv_i8(m->config, {KvDType::Int8, 4, 64});
  EXPECT_EQ(uses_bf16_attention(kv_bf, on_bf), ops::attention_bf16_available());
  EXPECT_FALSE(uses_bf16_attention(kv_f32, on_bf));  // an f32 cache keeps f32 attention
  EXPECT_FALSE(uses_bf16_attention(kv_i8, on_bf));
  EXPECT_FALSE(uses_bf16_attention(kv_bf, on_f32));  // --compute f32
  EXPECT_FALSE(uses_bf16_attention(kv_bf, reference));
  if (ops::attention_bf16_available()) {
    EXPECT_NE(describe_attention(ops::KvElem::BF16, on_bf).find("VDPBF16PS"), std::string::npos);
    ops::MatmulContext tiled = bf;
    tiled.attention_tiles = ops::Bf16Tiles::Emulated;
    const blocks::Exec on_tiles{&tiled};
    EXPECT_NE(describe_attention(ops::KvElem::BF16, on_tiles).find("software model of AMX-BF16 tiles"), std::string::npos);
    EXPECT_EQ(describe_attention(ops::KvElem::I8, on_tiles), describe_attention(ops::KvElem::I8, on_bf));
  }
  EXPECT_NE(describe_attention(ops::KvElem::I8, on_bf).find("int8 K/V widened"), std::string::npos);
  // Where the plan prefers FMA (ops::plan_attention: Intel), a bf16 cache is widened for the f32
  // kernel and the description says why; AMX-BF16 tiles still take it where they are on.
  ops::MatmulContext fma = bf;
  fma.attention_bf16_dots = false;
  const blocks::Exec on_fma{&fma};
  EXPECT_FALSE(uses_bf16_attention(kv_bf, on_fma));
  EXPECT_NE(describe_attention(ops::KvElem::BF16, on_fma).find("bf16 K/V widened to f32"), std::string::npos);
  EXPECT_EQ(describe_attention(ops::KvElem::BF16, on_fma).find("plan_attention") != std::string::npos,
            ops::attention_bf16_available());
  fma.attention_tiles = ops::Bf16Tiles::Emulated;
  EXPECT_EQ(uses_bf16_attention(kv_bf, on_fma), ops::attention_bf16_available());
  // The int8 kernel: activations = q8 and an int8 cache, nothing else.
  ops::MatmulContext i8{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = true};
  const blocks::Exec on_i8{&i8};
  EXPECT_EQ(uses_int8_attention(kv_i8, on_i8), ops::attention_int8_available());
  EXPECT_FALSE(uses_int8_attention(kv_bf, on_i8));
  EXPECT_FALSE(uses_int8_attention(kv_f32, on_i8));
  EXPECT_FALSE(uses_int8_attention(kv_i8, on_f32));  // f32 activations keep f32 queries
  EXPECT_FALSE(uses_int8_attention(kv_i8, on_bf));
  EXPECT_FALSE(uses_int8_attention(kv_i8, reference));
  if (ops::attention_int8_available()) {
    EXPECT_NE(describe_attention(ops::KvElem::I8, on_i8).find("VPDPBUSD"), std::string::npos);
  }
  EXPECT_NE(describe_attention(ops::KvElem::BF16, reference).find("reference"), std::string::npos);
}

// Rounding activations to bf16 moves logits; bounded against the f32 reference loops on the
// same bf16 weights (bounds from measurement, printed).
TEST_F(Bf16Compute, StaysNearTheF32Reference) {
  if (!ops::gemm_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  ThreadPool pool(2);
  ops::MatmulContext mm{.pool = &pool, .panel_rows = 4, .bf16_compute = true};
  blocks::Exec ex{&mm};
  for (const std::string p : {"tiny-e", "tiny-moe", "tiny-e interleaved", "tiny-moe interleaved", "tiny-e tiles",
                               "tiny-moe tiles"}) {
    const std::string name = p.substr(0, p.find(' '));
    auto m = p == name ? model(name) : interleaved(name);
    mm.bf16_tiles = p.ends_with("tiles") ? ops::Bf16Tiles::Emulated : ops::Bf16Tiles::None;
    const auto tokens = random_tokens(24, m->config.vocab_size, 7);
    const auto got = alone(*m, tokens, ex);
    const auto ref = forward_reference(*m, tokens);
    double worst = 0, mean = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
      mean += std::fabs(got[i] - ref[i]);
      scale += std::fabs(ref[i]);
    }
    mean /= double(ref.size());
    scale /= double(ref.size());
    std::printf("[ bf16    ] %s: max |delta logit| %.4f, mean %.5f (mean |logit| %.3f)\n", p.c_str(), worst, mean, scale);
    EXPECT_GT(worst, 0.0);  // it really ran the bf16 kernel
    EXPECT_LT(mean, 0.02 * scale) << p;
    EXPECT_LT(worst, 0.5) << p;
  }
}

// bf16 compute over a bf16 cache (the bf16 attention kernel) against the f32 whole-sequence
// reference, with its two ingredients as the yardstick: bf16 compute over an f32 cache (the
// weight products alone) and the reference loops over a bf16 cache (the stored K/V rounding
// alone). Their errors add; the kernel's own rounding of queries and softmax weights may add at
// most half again (measured figures printed). Dense models also keep the absolute bound above;
// MoE routing can flip an expert on any of these perturbations, so only the mean binds there.
TEST_F(Bf16Compute, Bf16AttentionErrsAboutAsMuchAsItsParts) {
  if (!ops::attention_bf16_available()) GTEST_SKIP() << "no confirmed AVX512_BF16 on this CPU";
  ThreadPool pool(2);
  ops::MatmulContext mm{.pool = &pool, .panel_rows = 4, .bf16_compute = true};
  const blocks::Exec ex{&mm}, reference{};
  auto mean_abs_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / double(a.size());
  };
  // "tiles": the attention on the software model of AMX-BF16 tiles (the weight products on
  // VDPBF16PS, as measured by `compute`). On tiny-e32 it must differ from the VDPBF16PS kernel's
  // bits (it ran); tiny-moe's full layers (K = V) put all weight on one key at these lengths, where
  // both kernels return that value row exactly.
  for (const std::string p : {"tiny-e", "tiny-moe", "tiny-e32", "tiny-e32 tiles", "tiny-moe tiles"}) {
    const std::string name = p.substr(0, p.find(' '));
    auto m = model(name);
    const auto tokens = random_tokens(40, m->config.vocab_size, 9);
    const auto whole = forward_reference(*m, tokens);
    mm.attention_tiles = ops::Bf16Tiles::None;
    const double compute = mean_abs_diff(alone(*m, tokens, ex, KvDType::F32), whole);
    const double cache = mean_abs_diff(alone(*m, tokens, reference, KvDType::BF16), whole);
    const auto vdpbf16ps = alone(*m, tokens, ex, KvDType::BF16);
    mm.attention_tiles = p.ends_with("tiles") ? ops::Bf16Tiles::Emulated : ops::Bf16Tiles::None;
    const auto got = alone(*m, tokens, ex, KvDType::BF16);
    const double both = mean_abs_diff(got, whole);
    std::printf("[ bf16 kv ] %s: mean |delta logit| bf16 compute %.5f + bf16 cache %.5f -> bf16 attention %.5f (max %.4f)\n",
                p.c_str(), compute, cache, both, double(test::max_abs_diff(got.data(), whole.data(), got.size())));
    EXPECT_GT(both, 0.0);
    EXPECT_LE(both, 1.5 * (compute + cache)) << p;
    if (!name.starts_with("tiny-moe")) {
      EXPECT_LT(test::max_abs_diff(got.data(), whole.data(), got.size()), 0.5f);
    }
    if (p == "tiny-e32 tiles") {
      EXPECT_NE(0, std::memcmp(got.data(), vdpbf16ps.data(), got.size() * sizeof(float))) << p << ": tiles did not run";
    }
  }
}

// Q8_0/Q4_0 weights (re-encoded at load, as --weights q8|q4 does) with int8 activations.
class Int8Activations : public Bf16Compute {
 protected:
  void SetUp() override {
    if (!ops::gemm_q8_available()) GTEST_SKIP() << "no integer dot product (AVX2, AVX-VNNI, AVX512_VNNI, SDOT) on this CPU";
  }
  // `interleave`: then also re-ordered into Q8_0_R16 / Q4_0_R16 as generate/bench/serve do.
  static std::unique_ptr<Model> quantized(const std::string& p, DType t, bool interleave = false) {
    auto m = model(p);
    const RequantizeReport r = requantize_weights(*m, t, nullptr);
    EXPECT_GT(r.tensors, 0) << p << ": nothing was re-encoded, so nothing below would test the int8 kernel";
    if (interleave) {
      ThreadPool pool(2);
      const InterleaveReport ir = interleave_weights(*m, &pool, InterleaveFor{.int8 = true, .bf16 = false});
      if (ops::int8_kernel_reads(interleaved_dtype(t))) {
        EXPECT_GT(ir.tensors, 0) << p << ": nothing was interleaved";
        EXPECT_EQ(m->weights.layers[0].q_proj->dtype, interleaved_dtype(t)) << p;
      } else {  // NEON: no kernel reads the interleaved rows, so the weights stay row-major
        EXPECT_EQ(ir.tensors, 0) << p << ": interleaved for a tier that cannot read it";
        EXPECT_EQ(m->weights.layers[0].q_proj->dtype, t) << p;
      }
      EXPECT_EQ(m->weights.lm_head, m->weights.embed_tokens) << p << ": the tied head came untied";
    }
    return m;
  }
};

TEST_F(Int8Activations, BatchingAndChunkingAreBitExact) {
  for (bool interleave : {false, true})
    for (DType t : {DType::Q8_0, DType::Q4_0})
      for (const char* p : {"tiny-e", "tiny-moe"}) {
        SCOPED_TRACE(std::string(p) + " " + std::string(dtype_name(t)) + (interleave ? " interleaved" : ""));
        expect_batching_is_exact(*quantized(p, t, interleave), {.int8_activations = true});
      }
}

// On AMX-INT8 tiles (here the software model of them, where the CPU has none): prefill steps of
// 5 tokens run the Q8_0_R16 / Q4_0_R16 products on the tiles, one-token steps on VPDPBUSD, and
// the logits of each sequence batched and alone are still the same bits.
TEST_F(Int8Activations, BatchingAndChunkingAreBitExactOnTheTiles) {
  if (!ops::int8_kernel_reads(DType::Q8_0_R16)) GTEST_SKIP() << "the tiles read interleaved rows, which this tier does not";
  for (DType t : {DType::Q8_0, DType::Q4_0})
    for (const char* p : {"tiny-e", "tiny-moe"}) {
      SCOPED_TRACE(std::string(p) + " " + std::string(dtype_name(t)));
      expect_batching_is_exact(*quantized(p, t, true),
                               {.int8_activations = true, .int8_tiles = ops::Int8Tiles::Emulated});
    }
}

// With an int8 KV cache the attention runs on the int8 kernel too (ops/attention/attention_int8.h), and the
// step's own rows are quantized as the cache stores them: prefilling 5 rows at once and decoding
// one at a time still give the same bits.
TEST_F(Int8Activations, BatchingAndChunkingAreBitExactOnTheInt8AttentionKernel) {
  if (!ops::attention_int8_available()) GTEST_SKIP() << "no int8 attention kernel on this CPU";
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    SCOPED_TRACE(p);
    expect_batching_is_exact(*quantized(p, DType::Q8_0, true), {.int8_activations = true, .kv_type = KvDType::Int8});
  }
}

// What the int8 cache and the int8 attention kernel cost on the whole path, against the f32
// reference loops: int8 activations with an int8 cache (int8 kernel) may err at most 2.5x the
// int8 cache's own cost (on the reference path: f32 queries over the same rounded K/V) beyond
// what int8 activations with an f32 cache err. (Not the two SIMD runs against each other: a
// small change in a hidden state re-rounds every later int8 activation, so their difference is
// about the size of the activation rounding itself.) Figures printed; and the kernel must differ
// from the f32 kernel on the same cache, so it really ran.
TEST_F(Int8Activations, Int8AttentionCostsAboutWhatTheInt8CacheCosts) {
  if (!ops::attention_int8_available()) GTEST_SKIP() << "no int8 attention kernel on this CPU";
  ThreadPool pool(2);
  ops::MatmulContext int8{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = true};
  const blocks::Exec ex_int8{&int8}, reference{};
  auto mean_abs_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / double(a.size());
  };
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    auto m = quantized(p, DType::Q8_0);
    const auto tokens = random_tokens(40, m->config.vocab_size, 9);
    const auto truth = forward_reference(*m, tokens);
    const double cache_cost = mean_abs_diff(alone(*m, tokens, reference, KvDType::Int8), alone(*m, tokens, reference));
    const auto int8_cache = alone(*m, tokens, ex_int8, KvDType::Int8);
    const double base = mean_abs_diff(alone(*m, tokens, ex_int8), truth), got = mean_abs_diff(int8_cache, truth);
    std::printf("[ int8 kv ] %s Q8_0, mean |delta logit| vs the f32 reference loops: int8 activations, f32 cache %.5f; "
                "int8 cache + int8 attention kernel %.5f (the int8 cache on the reference path: %.5f)\n",
                p, base, got, cache_cost);
    EXPECT_GT(cache_cost, 0.0) << p;
    EXPECT_LT(got, base + 2.5 * cache_cost) << p;
    // The f32 kernel over the same int8 cache (f32 activations keep f32 queries).
    ops::MatmulContext f32_acts{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = false};
    const auto f32_kernel = alone(*m, tokens, blocks::Exec{&f32_acts}, KvDType::Int8);
    EXPECT_NE(0, std::memcmp(f32_kernel.data(), int8_cache.data(), f32_kernel.size() * sizeof(float))) << p;
  }
}

// Decode with the workers reading each next product's weights ahead (ThreadPool::warm, planned
// on AMD) computes exactly what it computes without: same bits, token by token, and the warm
// really ran (the pool counted the bytes its workers read).
TEST_F(Int8Activations, WarmingTheNextProductChangesNoBits) {
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    auto m = quantized("tiny-e", t, true);
    const auto tokens = random_tokens(20, m->config.vocab_size, 11);
    ThreadPool pool(2);
    ops::MatmulContext cold{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = true};
    ops::MatmulContext warm = cold;
    warm.decode.warm_bytes = 4096;
    const auto plain = alone(*m, tokens, blocks::Exec{&cold});
    EXPECT_EQ(pool.warmed_bytes(), 0u);
    const auto warmed = alone(*m, tokens, blocks::Exec{&warm});
    EXPECT_GT(pool.warmed_bytes(), 0u) << dtype_name(t) << ": no product was warmed";
    ASSERT_EQ(plain.size(), warmed.size());
    EXPECT_EQ(0, std::memcmp(plain.data(), warmed.data(), plain.size() * sizeof(float))) << dtype_name(t);
  }
}

// Interleaving re-orders bytes and nothing else: the f32 reference loops (which read each row
// out of its group, the tied embedding's gathers included) give the same logits bit for bit.
TEST_F(Int8Activations, InterleavingChangesNoValue) {
  for (DType t : {DType::Q8_0, DType::Q4_0})
    for (const char* p : {"tiny-e", "tiny-moe"}) {
      const auto tokens = random_tokens(12, model(p)->config.vocab_size, 3);
      const auto rows = forward_reference(*quantized(p, t), tokens);
      const auto groups = forward_reference(*quantized(p, t, true), tokens);
      ASSERT_EQ(rows.size(), groups.size());
      EXPECT_EQ(0, std::memcmp(rows.data(), groups.data(), rows.size() * sizeof(float))) << p << " " << dtype_name(t);
    }
}

// Quantizing activations to int8 moves logits. Measured against the f32 reference loops on the
// same Q8_0/Q4_0 weights (so only the activation rounding counts), with the Q8_0 weight rounding
// itself as the yardstick: int8 activations may cost at most 2.5x what Q8_0 weights cost on the
// same model (a margin MoE needs too, where expert choices can flip). Also checked to differ
// from the f32-activation SIMD path, so the kernel really ran.
TEST_F(Int8Activations, CostsNoMoreThanQ8WeightsAgainstTheF32Reference) {
  ThreadPool pool(2);
  ops::MatmulContext int8{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = true};
  ops::MatmulContext f32{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = false};
  blocks::Exec ex_int8{&int8}, ex_f32{&f32};
  auto mean_abs_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / double(a.size());
  };
  for (const char* p : {"tiny-e", "tiny-moe"}) {
    const auto tokens = random_tokens(24, model(p)->config.vocab_size, 7);
    const auto ref_bf16 = forward_reference(*model(p), tokens);
    const double q8_weights_cost = mean_abs_diff(forward_reference(*quantized(p, DType::Q8_0), tokens), ref_bf16);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q8_0_R16, DType::Q4_0_R16}) {
      auto m = quantized(p, interleave_base(t), dtype_is_interleaved(t));
      const auto got = alone(*m, tokens, ex_int8);
      const auto simd = alone(*m, tokens, ex_f32);
      const auto ref = forward_reference(*m, tokens);
      double worst = 0, simd_worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
        simd_worst = std::max(simd_worst, double(std::fabs(simd[i] - ref[i])));
      }
      const double mean = mean_abs_diff(got, ref);
      std::printf("[ int8    ] %s %s: max |delta logit| %.4f, mean %.5f (Q8_0 weights alone: mean %.5f; f32 SIMD max %.2g)\n",
                  p, std::string(dtype_name(t)).c_str(), worst, mean, q8_weights_cost, simd_worst);
      EXPECT_GT(worst, 10 * simd_worst + 1e-6) << p << ": indistinguishable from f32 activations";
      EXPECT_LT(mean, 2.5 * q8_weights_cost) << p;
      if (std::string(p) == "tiny-e") {
        EXPECT_LT(worst, 1.0) << p;  // dense: no expert choice to flip
      }
    }
  }
}

// K-quant GGUF weights (Q4_K, Q6_K, as a Q4_K_M file holds) read in place by the int8 K-quant
// tiles (ops/matmul/gemm_kquant.h), and also interleaved 16 rows at a time (Q4_K_R16, Q5_K_R16, Q6_K_R16). The fixtures are 64 wide and K-quants need rows of whole 256-value
// super-blocks, so a tiny-e shaped model 256 wide is written as GGUFs (matrices whose rows are
// not whole super-blocks stay F32). Batching and chunking change no bit; against the reference
// loops on the same weights, the int8 activations cost no more than 2.5x what rounding the
// weights to Q8_0 costs (the yardstick of the test above), and the kernel demonstrably ran.
TEST_F(Int8Activations, KQuantGgufWeightsAreBitExactUnderBatchingAndCostAboutWhatQ8Costs) {
  test::TempDir tmp;
  const ModelConfig c = test::kquant_wide_tiny_e(4);
  write_synth_checkpoint(c, SynthOptions{}, tmp / "hf");
  auto hf = load_model(tmp / "hf");
  const auto tokens = random_tokens(24, c.vocab_size, 7);
  auto mean_abs_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / double(a.size());
  };
  write_model_gguf(*hf, DType::Q8_0, tmp / "q8.gguf");
  const double q8_weights_cost = mean_abs_diff(forward_reference(*load_model(tmp / "q8.gguf"), tokens), forward_reference(*hf, tokens));
  ThreadPool pool(2);
  ops::MatmulContext int8{.pool = &pool, .panel_rows = 4, .bf16_compute = false, .int8_activations = true};
  blocks::Exec ex{&int8};
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(t));
    const auto path = tmp / (std::string(dtype_name(t)) + ".gguf");
    write_model_gguf(*hf, t, path);
    auto m = load_model(path);
    ASSERT_EQ(m->weights.layers[0].q_proj->dtype, t);
    EXPECT_NE(ops::describe_matmul(int8, t).find("super-blocks x int8"), std::string::npos) << ops::describe_matmul(int8, t);
    expect_batching_is_exact(*m, {.int8_activations = true});
    const auto got = alone(*m, tokens, ex);
    const auto ref = forward_reference(*m, tokens);
    const double mean = mean_abs_diff(got, ref);
    std::printf("[ int8 k  ] %s: mean |delta logit| %.5f vs the reference loops on the same weights (Q8_0 weights alone: %.5f)\n",
                std::string(dtype_name(t)).c_str(), mean, q8_weights_cost);
    EXPECT_GT(mean, 0.0);  // int8 tiers: the activations were rounded, the int8 kernel ran
    EXPECT_LT(mean, 2.5 * q8_weights_cost);
    // In memory g4 owns (as generate/bench/serve place it) the matrices are interleaved (Q4_K_R16,
    // Q6_K_R16) and
    // read 16 rows per VPDPBUSD (ops/matmul/gemm_kquant.h): batching still changes no bit, and against
    // the same reference loops (which read each row back out of its group) the cost stays
    // within the same yardstick.
    if (!ops::int8_kernel_reads(interleaved_dtype(t))) continue;  // NEON: row-major only
    place_weights(*m, WeightMemory::Huge, &pool);
    const InterleaveReport ir = interleave_weights(*m, &pool, InterleaveFor{.int8 = true, .bf16 = false});
    EXPECT_GT(ir.tensors, 0);
    const DType il = interleaved_dtype(t);
    ASSERT_EQ(m->weights.layers[0].q_proj->dtype, il);
    EXPECT_NE(ops::describe_matmul(int8, il).find("16 rows interleaved"), std::string::npos);
    expect_batching_is_exact(*m, {.int8_activations = true});
    const auto got_r16 = alone(*m, tokens, ex);
    const double mean_r16 = mean_abs_diff(got_r16, forward_reference(*m, tokens));
    std::printf("[ int8 k  ] %s: mean |delta logit| %.5f vs the reference loops on the same weights\n",
                std::string(dtype_name(il)).c_str(), mean_r16);
    EXPECT_GT(mean_r16, 0.0);
    EXPECT_LT(mean_r16, 2.5 * q8_weights_cost);
  }
}

}  // namespace
}  // namespace g4
