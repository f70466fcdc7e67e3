// The GPU decoder's weights: quantized blocks (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K) dequantized in the shaders,
// checked against forward_reference on the same quantized model (g4's own GGUF copies of the tiny
// fixtures, and a 256-wide synth model for the K-quants, whose 256-value blocks the 64-wide
// fixtures lack); matrices split over several buffers, bit-identical to the unsplit run; and the
// refusals of what cannot be split or held. Skips where no Vulkan device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <ostream>
#include <set>
#include <string>

#include "gpu/vulkan/vk_decoder.h"
#include "gpu_model/gemma4_gpu.h"
#include "kquant_wide_config.h"
#include "model/forward_reference.h"
#include "model/gguf_writer.h"
#include "model/model.h"
#include "model/synth.h"
#include "platform/error.h"
#include "test_util.h"
#include "vk_decoder_fixtures.h"
#include "vk_test_session.h"

namespace g4::gpu {
namespace {

using vk_test::argmax_row;
using vk_test::kRelBound;
using vk_test::max_abs;

std::filesystem::path fixture(const std::string& name) { return g4::test::fixtures_dir() / "gemma4-tiny" / name; }

// The f32 model of a case: a shared fixture, or "wide" (tiny-e 256 wide, written by g4 synth).
std::unique_ptr<Model> f32_model(const std::string& name, const g4::test::TempDir& tmp) {
  if (name != "wide") return load_model(fixture(name) / "hf");
  write_synth_checkpoint(g4::test::kquant_wide_tiny_e(), SynthOptions{}, tmp / "wide");
  return load_model(tmp / "wide");
}

// 40 tokens: the fixtures' second sequence, or a spread of ids for the synth model.
std::vector<int> tokens_for(const std::string& name) {
  if (name != "wide") return vk_test::sequences(fixture(name))[1].tokens;
  std::vector<int> t;
  for (int i = 0; i < 40; ++i) t.push_back(5 + (i * 37) % 500);
  return t;
}

std::set<DType> matrix_dtypes(Model& m) {
  std::set<DType> out;
  for (const TensorView** slot : streamed_matrices(m.weights)) out.insert((*slot)->dtype);
  for (const TensorView* t : {m.weights.embed_tokens, m.weights.embed_per_layer})
    if (t) out.insert(t->dtype);
  return out;
}

struct QuantCase {
  std::string model;
  DType type;
  QuantMix mix;
  std::vector<DType> read;  // dtypes the quantized model's matrices must include
};

// A gtest name: the model, then the dtype (tiny_e_Q4_0).
std::string test_name(const std::string& model, std::optional<DType> t, const char* suffix = "") {
  std::string n = model + (t ? "_" + std::string(dtype_name(*t)) : "") + suffix;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

void PrintTo(const QuantCase& c, std::ostream* os) { *os << test_name(c.model, c.type); }

class GpuQuantized : public ::testing::TestWithParam<QuantCase> {};

// The GPU on g4's own quantized GGUF against forward_reference on the same file (which
// dequantizes each row with platform/block_formats.cpp): the bound of the f32 tests, and the same
// argmax at every position. The distance to the unquantized model's logits is the quantization
// error itself; it must be far over the bound, so the bound would see a wrong scale, nibble or
// sign (those measured 0.1-20 off, docs/gpu.md).
TEST_P(GpuQuantized, MatchesReferenceOnTheSameBlocks) {
  OPEN_OR_SKIP(s);
  const QuantCase& c = GetParam();
  g4::test::TempDir tmp;
  auto hf = f32_model(c.model, tmp);
  write_model_gguf(*hf, c.type, tmp / "q.gguf", {}, c.mix);
  auto q = load_model(tmp / "q.gguf");
  const std::set<DType> dtypes = matrix_dtypes(*q);
  for (DType t : c.read) EXPECT_TRUE(dtypes.count(t)) << "no " << dtype_name(t) << " matrix in the copy";
  const std::vector<int> tokens = tokens_for(c.model);
  GpuDecoder dec(*s, gpu_decoder_spec(*q), {64, 64});
  const std::vector<float> got = dec.step(tokens).logits, want = forward_reference(*q, tokens);
  ASSERT_EQ(got.size(), want.size());
  const float bound = kRelBound * max_abs(want);
  const float d = g4::test::max_abs_diff(got.data(), want.data(), want.size());
  EXPECT_LE(d, bound);
  const size_t V = size_t(q->config.vocab_size);
  for (size_t t = 0; t < tokens.size(); ++t)
    EXPECT_EQ(argmax_row(&got[t * V], V), argmax_row(&want[t * V], V)) << "position " << t;
  const std::vector<float> unquantized = forward_reference(*hf, tokens);
  const float q_err = g4::test::max_abs_diff(got.data(), unquantized.data(), got.size());
  if (dtype_is_quantized(c.type)) {  // f16 words round too little for that
    EXPECT_GT(q_err, 20 * bound) << "the quantized copy is indistinguishable from f32 at this bound";
  }
  std::printf("[ gpu quant ] %s %s%s: max |d| vs reference on the same blocks %.3g (bound %.3g); vs f32 model %.3g\n",
              c.model.c_str(), std::string(dtype_name(c.type)).c_str(), c.mix == QuantMix::Q4_K_M ? "_M" : "", d,
              bound, q_err);
}

// Q8_0/Q4_0/Q4_1 on the fixtures (the MoE's experts included), f16 words (gathered tables and
// experts too, which had no f16 shader before), and the K-quants on the 256-wide
// model: Q4_K_M is Q4_K with Q6_K on the tied head and some attn_v/ffn_down; Q5_K and Q6_K
// everywhere they fit (Q8_0 elsewhere).
INSTANTIATE_TEST_SUITE_P(
    Formats, GpuQuantized,
    ::testing::Values(QuantCase{"tiny-31b", DType::Q8_0, QuantMix::Uniform, {DType::Q8_0}},
                      QuantCase{"tiny-e", DType::Q4_0, QuantMix::Uniform, {DType::Q4_0}},
                      QuantCase{"tiny-31b", DType::Q4_1, QuantMix::Uniform, {DType::Q4_1}},
                      QuantCase{"tiny-e", DType::F16, QuantMix::Uniform, {DType::F16}},
                      QuantCase{"tiny-moe", DType::F16, QuantMix::Uniform, {DType::F16}},
                      QuantCase{"tiny-moe", DType::Q8_0, QuantMix::Uniform, {DType::Q8_0}},
                      QuantCase{"tiny-moe", DType::Q4_0, QuantMix::Uniform, {DType::Q4_0}},
                      QuantCase{"wide", DType::Q4_K, QuantMix::Q4_K_M, {DType::Q4_K, DType::Q6_K}},
                      QuantCase{"wide", DType::Q5_K, QuantMix::Uniform, {DType::Q5_K}},
                      QuantCase{"wide", DType::Q6_K, QuantMix::Uniform, {DType::Q6_K}}),
    [](const ::testing::TestParamInfo<QuantCase>& i) {
      return test_name(i.param.model, i.param.type, i.param.mix == QuantMix::Q4_K_M ? "_M" : "");
    });

struct SplitCase {
  std::string model;
  std::optional<DType> type;  // quantized copy, or the f32 fixture
  uint64_t max_buffer_bytes;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << test_name(c.model, c.type) << " " << c.max_buffer_bytes; }

class GpuSplit : public ::testing::TestWithParam<SplitCase> {};

// Every weight buffer limited to a few KiB: the embedding table (and tied head), the per-layer
// table, the projections and the experts go into many parts of whole rows (whole experts), each
// dispatched on its own rows. Every logit must equal the unsplit run's bit for bit: a part
// computes its outputs with the same operations in the same order.
TEST_P(GpuSplit, ManyPartsGiveTheUnsplitLogitsBitForBit) {
  OPEN_OR_SKIP(s);
  const SplitCase& c = GetParam();
  g4::test::TempDir tmp;
  auto model = load_model(fixture(c.model) / "hf");
  if (c.type) {
    write_model_gguf(*model, *c.type, tmp / "q.gguf");
    model = load_model(tmp / "q.gguf");
  }
  const std::vector<int> tokens = tokens_for(c.model);
  GpuDecoder whole(*s, gpu_decoder_spec(*model), {64, 64});
  GpuDecoder split(*s, gpu_decoder_spec(*model), {64, 64, c.max_buffer_bytes});
  const std::vector<float> a = whole.step(tokens).logits;
  const GpuStepResult b = split.step(tokens);
  ASSERT_EQ(a.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.data(), b.logits.data(), a.size() * 4), 0)
      << "max |d| " << g4::test::max_abs_diff(a.data(), b.logits.data(), a.size());
  EXPECT_GE(split.weight_buffers(), whole.weight_buffers() + 20);  // dozens of parts (20: tiny-moe Q8_0)
  EXPECT_GE(split.weight_bytes(), whole.weight_bytes());  // parts round up to whole words only
  // A one-token step after the prefill reads the parts too.
  const std::vector<float> a1 = whole.step({tokens[3]}).logits, b1 = split.step({tokens[3]}).logits;
  EXPECT_EQ(std::memcmp(a1.data(), b1.data(), a1.size() * 4), 0);
  std::printf("[ gpu split ] %s%s%s, buffers of <= %llu bytes: %u weight buffers (unsplit %u), %u dispatches a step\n",
              c.model.c_str(), c.type ? " " : "", c.type ? std::string(dtype_name(*c.type)).c_str() : "",
              (unsigned long long)c.max_buffer_bytes, split.weight_buffers(), whole.weight_buffers(), b.dispatches);
}

// Limits: 4 KiB holds 16 f32 rows of the 64-wide tables (32 parts of the embedding, 80 of tiny-e's
// per-layer table of 640-byte rows); 16 KiB one tiny-moe expert's gate_up; 13056 bytes three of
// its Q8_0 experts; 1000 bytes 27 Q4_0 rows of 36 bytes, so parts start at odd 18-byte blocks.
INSTANTIATE_TEST_SUITE_P(Limits, GpuSplit,
                         ::testing::Values(SplitCase{"tiny-31b", std::nullopt, 4096},
                                           SplitCase{"tiny-e", std::nullopt, 4096},
                                           SplitCase{"tiny-moe", std::nullopt, 16384},
                                           SplitCase{"tiny-moe", DType::Q8_0, 13056},
                                           SplitCase{"tiny-e", DType::Q4_0, 1000}),
                         [](const ::testing::TestParamInfo<SplitCase>& i) {
                           return test_name(i.param.model, i.param.type);
                         });

// At the device's own limit: tiny-31b's tied table repeated to just over maxStorageBufferRange
// (lavapipe: 524800 rows of 256 bytes, 128 MiB + 128 KiB) goes into two buffers, and every logit
// v of the big vocabulary is the small model's logit v % 512, bit for bit: the rows of the second
// part are gathered and multiplied like those of the first.
TEST(GpuDecoderWeights, ATableOverTheRangeIsSplitAtTheDevicesLimit) {
  OPEN_OR_SKIP(s);
  auto model = load_model(fixture("tiny-31b") / "hf");
  GpuDecoderSpec spec = gpu_decoder_spec(*model);
  const TensorView& table = *spec.embed_tokens;
  ASSERT_EQ(spec.lm_head, spec.embed_tokens);  // tied
  const uint64_t small_rows = uint64_t(table.shape[0]), row_bytes = table.nbytes / small_rows;
  const uint64_t rows = (s->info().max_storage_buffer_range / row_bytes / small_rows + 1) * small_rows;
  std::vector<std::byte> bytes(rows * row_bytes);
  for (uint64_t r = 0; r < rows; r += small_rows) std::memcpy(&bytes[r * row_bytes], table.data, table.nbytes);
  TensorView big = table;
  big.shape[0] = int64_t(rows);
  big.data = bytes.data();
  big.nbytes = bytes.size();
  spec.embed_tokens = spec.lm_head = &big;
  spec.vocab = int(rows);
  const std::vector<int> tokens = vk_test::sequences(fixture("tiny-31b"))[0].tokens;
  GpuDecoder small(*s, gpu_decoder_spec(*model), {8, 8}), split(*s, spec, {8, 8});
  EXPECT_EQ(split.weight_buffers(), small.weight_buffers() + 1);  // the table in two parts
  const std::vector<float> a = small.step(tokens).logits;
  const GpuStepResult rb = split.step(tokens);
  const std::vector<float>& b = rb.logits;
  ASSERT_EQ(b.size(), tokens.size() * rows);
  size_t differing = 0;
  for (size_t t = 0; t < tokens.size(); ++t)
    for (uint64_t r = 0; r < rows; r += small_rows)
      differing += std::memcmp(&b[t * rows + r], &a[t * small_rows], small_rows * 4) != 0;
  EXPECT_EQ(differing, 0u);
  std::printf("[ gpu split ] tiny-31b table as %llu rows (%llu bytes, range %llu): %u weight buffers (%u unsplit), "
              "%.2f s of device time for the step\n",
              (unsigned long long)rows, (unsigned long long)bytes.size(),
              (unsigned long long)s->info().max_storage_buffer_range, split.weight_buffers(), small.weight_buffers(),
              rb.device_seconds.value_or(0.0));
}

std::string refusal(const VulkanSession& s, const GpuDecoderSpec& spec, GpuDecoderLimits limits = {8, 8}) {
  try {
    GpuDecoder dec(s, spec, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "no refusal";
}

// One row over the buffer limit cannot be split: refused at load, naming the tensor and both
// sizes, before any of its bytes is read (the view's data is null).
TEST(GpuDecoderWeights, RefusesARowOverTheStorageBufferRange) {
  OPEN_OR_SKIP(s);
  auto model = load_model(fixture("tiny-31b") / "hf");
  GpuDecoderSpec spec = gpu_decoder_spec(*model);
  const uint64_t range = s->info().max_storage_buffer_range;
  TensorView huge;
  huge.name = "huge.weight";
  huge.shape = {2, int64_t(range / 4) + 1};
  spec.layers[0].q_proj = &huge;
  const std::string what = refusal(*s, spec);
  EXPECT_NE(what.find("huge.weight"), std::string::npos) << what;
  EXPECT_NE(what.find("maxStorageBufferRange"), std::string::npos) << what;
  EXPECT_NE(what.find(std::to_string(range + 4) + " bytes"), std::string::npos) << what;  // the row
  EXPECT_NE(what.find(std::to_string(range / 4 * 4) + " bytes"), std::string::npos) << what;  // the limit
  // The same with the test's lower limit: a 64-wide f32 row is 256 bytes.
  const std::string low = refusal(*s, gpu_decoder_spec(*model), {8, 8, 200});
  EXPECT_NE(low.find("256 bytes"), std::string::npos) << low;
  EXPECT_NE(low.find("max_buffer_bytes"), std::string::npos) << low;
  std::printf("[ gpu refusal ] %s\n[ gpu refusal ] %s\n", what.c_str(), low.c_str());
}

// A matrix over the range is split, not refused; weights over the largest device-local heap are
// refused before anything is uploaded (the view's data is null), with the bytes needed and held.
TEST(GpuDecoderWeights, RefusesWeightsOverTheDeviceHeapBeforeUploading) {
  OPEN_OR_SKIP(s);
  auto model = load_model(fixture("tiny-31b") / "hf");
  GpuDecoderSpec spec = gpu_decoder_spec(*model);
  const uint64_t heap = s->info().device_local_bytes();
  ASSERT_GT(heap, 0u);
  TensorView huge;
  huge.name = "huge.weight";
  huge.shape = {int64_t(heap / 4096) + 1, 1024};  // f32: just over the heap, in many buffers' worth
  spec.layers[0].q_proj = &huge;
  const std::string what = refusal(*s, spec);
  EXPECT_NE(what.find("device-local heap holds"), std::string::npos) << what;
  EXPECT_NE(what.find("(" + std::to_string(heap) + " bytes)"), std::string::npos) << what;
  EXPECT_NE(what.find("before uploading"), std::string::npos) << what;
  std::printf("[ gpu refusal ] %s\n", what.c_str());
}

// Formats without a shader (the CPU's row-interleaved layouts) are refused by name, before any
// byte is read.
TEST(GpuDecoderWeights, RefusesAFormatWithoutAShader) {
  OPEN_OR_SKIP(s);
  auto model = load_model(fixture("tiny-31b") / "hf");
  GpuDecoderSpec spec = gpu_decoder_spec(*model);
  TensorView interleaved = *spec.layers[0].q_proj;
  interleaved.dtype = DType::Q8_0_R16;
  spec.layers[0].q_proj = &interleaved;
  const std::string what = refusal(*s, spec);
  EXPECT_NE(what.find("Q8_0_R16"), std::string::npos) << what;
  EXPECT_NE(what.find("gpu decoder: weight " + interleaved.name), std::string::npos) << what;
  std::printf("[ gpu refusal ] %s\n", what.c_str());
}

}  // namespace
}  // namespace g4::gpu
