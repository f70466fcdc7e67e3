// GGUF reader refusals (every malformed input is a clean g4::Error naming the problem), the
// writer's round trip, and the logit error of g4's own quantized copies of the fixtures.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/forward_reference.h"
#include "model/gguf.h"
#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "model/gguf_writer.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/synth.h"
#include "platform/error.h"
#include "kquant_wide_config.h"
#include "test_util.h"

namespace g4 {
namespace {

std::filesystem::path fixture(const std::string& v) { return test::fixtures_dir() / "gemma4-tiny" / v; }

template <typename T>
void poke(std::string& b, uint64_t at, T v) {
  std::memcpy(&b[size_t(at)], &v, sizeof(T));
}

// Loads `bytes` as a GGUF model; returns the error text ("" when it loaded).
std::string load_error(const test::TempDir& tmp, const std::string& bytes) {
  const auto p = tmp / "m.gguf";
  test::write_file(p, bytes);
  try {
    load_model(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class GgufRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    path = fixture("tiny-e") / "model.gguf";
    bytes = test::read_file(path);
    g = GgufFile::open(path);
  }
  const GgufTensorInfo& info(const std::string& name) const {
    for (const auto& t : g->tensor_infos())
      if (t.name == name) return t;
    throw Error("no tensor " + name);
  }
  // File offset of the tensor info's u32 type field (the u64 offset field follows it).
  uint64_t type_field(const GgufTensorInfo& t) const { return t.info_offset + 8 + t.name.size() + 4 + 8 * t.ne.size(); }
  std::filesystem::path path;
  std::string bytes;
  std::unique_ptr<GgufFile> g;
  test::TempDir tmp;
};

TEST_F(GgufRefusal, ReadsTheFixture) {
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 32u);
  EXPECT_EQ(g->tensor_infos().size(), 161u);
  EXPECT_EQ(g->get_string("general.architecture"), "gemma4");
  const GgufValue* toks = g->find("tokenizer.ggml.tokens");
  ASSERT_TRUE(toks);
  EXPECT_EQ(toks->strings.size(), 512u);
  EXPECT_EQ(toks->strings[2], "<bos>");
  const TensorView& q = g->tensors().at("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));
  const TensorView& k = g->tensors().at("blk.0.attn_k.weight");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{16, 64}));  // ne [64, 16] reversed: [out, in]
  EXPECT_EQ(load_error(tmp, bytes), "");
}

TEST_F(GgufRefusal, TruncatedAtSeveralPoints) {
  const uint64_t data = g->data_offset();
  for (uint64_t n : {uint64_t(0), uint64_t(3), uint64_t(10), uint64_t(23), uint64_t(30), uint64_t(200), uint64_t(5000),
                     data - 7, data + 100, uint64_t(bytes.size() / 2), uint64_t(bytes.size() - 1)}) {
    const std::string e = load_error(tmp, bytes.substr(0, size_t(n)));
    EXPECT_NE(e, "") << "truncated to " << n;
    EXPECT_TRUE(e.find("byte") != std::string::npos || e.find("bytes") != std::string::npos) << e;
  }
}

TEST_F(GgufRefusal, BadMagicAndVersion) {
  std::string b = bytes;
  b[0] = 'X';
  EXPECT_NE(load_error(tmp, b).find("magic"), std::string::npos);
  for (uint32_t v : {2u, 4u, 0x03000000u}) {
    b = bytes;
    poke<uint32_t>(b, 4, v);
    EXPECT_NE(load_error(tmp, b).find("version " + std::to_string(v)), std::string::npos);
  }
}

TEST_F(GgufRefusal, AbsurdCountsAndLengths) {
  std::string b = bytes;
  poke<uint64_t>(b, 8, 1ull << 40);
  EXPECT_NE(load_error(tmp, b).find("tensor count"), std::string::npos);
  b = bytes;
  poke<uint64_t>(b, 16, ~0ull);
  EXPECT_NE(load_error(tmp, b).find("metadata count"), std::string::npos);
  b = bytes;
  poke<uint64_t>(b, 24, 1ull << 50);  // the first key's length
  EXPECT_NE(load_error(tmp, b).find("past the end"), std::string::npos);
  // An array count the file cannot hold: refused before anything is allocated.
  const GgufValue* toks = g->find("tokenizer.ggml.tokens");
  b = bytes;
  poke<uint64_t>(b, toks->offset + 4, 1ull << 60);
  EXPECT_NE(load_error(tmp, b).find("cannot fit"), std::string::npos);
  // A token string length past EOF.
  b = bytes;
  poke<uint64_t>(b, toks->offset + 12, 1ull << 45);
  EXPECT_NE(load_error(tmp, b).find("runs past the end"), std::string::npos);
  // Unknown value type.
  b = bytes;
  poke<uint32_t>(b, toks->offset - 4, 77u);
  EXPECT_NE(load_error(tmp, b).find("unknown value type 77"), std::string::npos);
}

TEST_F(GgufRefusal, TensorInfoProblemsNameTheTensorAndOffset) {
  const GgufTensorInfo& q = info("blk.0.attn_q.weight");
  const uint64_t tf = type_field(q);
  std::string b = bytes;
  poke<uint64_t>(b, tf + 4, q.offset + 4);  // misaligned
  std::string e = load_error(tmp, b);
  EXPECT_NE(e.find("blk.0.attn_q.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("not a multiple of the alignment"), std::string::npos) << e;
  EXPECT_NE(e.find("byte " + std::to_string(q.info_offset)), std::string::npos) << e;
  b = bytes;
  poke<uint64_t>(b, tf + 4, uint64_t(bytes.size()));  // out of range
  e = load_error(tmp, b);
  EXPECT_NE(e.find("runs past the data section"), std::string::npos) << e;
  b = bytes;
  poke<uint64_t>(b, tf + 4, ~0ull & ~31ull);  // offset + size overflows
  EXPECT_NE(load_error(tmp, b).find("runs past the data section"), std::string::npos);
  b = bytes;
  poke<uint32_t>(b, tf, 99u);  // unknown type
  e = load_error(tmp, b);
  EXPECT_NE(e.find("ggml type 99 is not supported"), std::string::npos) << e;
  b = bytes;
  poke<uint32_t>(b, tf, 6u);  // Q5_0: a real ggml type g4 does not read
  EXPECT_NE(load_error(tmp, b).find("ggml type 6"), std::string::npos);
  b = bytes;
  poke<uint32_t>(b, tf, 12u);  // Q4_K: rows of 64 are not whole 256-blocks
  EXPECT_NE(load_error(tmp, b).find("not a multiple of the Q4_K block size"), std::string::npos);
  b = bytes;
  poke<uint32_t>(b, q.info_offset + 8 + q.name.size(), 9u);  // n_dims
  EXPECT_NE(load_error(tmp, b).find("n_dims 9"), std::string::npos);
  b = bytes;
  poke<uint64_t>(b, q.info_offset + 8 + q.name.size() + 4, 1ull << 50);  // ne[0]
  EXPECT_NE(load_error(tmp, b).find("absurd"), std::string::npos);
  // Overlap: point attn_q at attn_k's data.
  b = bytes;
  poke<uint64_t>(b, tf + 4, info("blk.0.attn_output.weight").offset);
  EXPECT_NE(load_error(tmp, b).find("overlap"), std::string::npos);
}

TEST_F(GgufRefusal, DuplicateNamesUnknownTensorsAndShapeMismatch) {
  const GgufTensorInfo& k = info("blk.0.attn_k.weight");
  std::string b = bytes;
  b[size_t(k.info_offset + 8 + 11)] = 'q';  // blk.0.attn_k -> blk.0.attn_q
  EXPECT_NE(load_error(tmp, b).find("appears twice"), std::string::npos);
  b = bytes;
  b[size_t(k.info_offset + 8 + 6)] = 'X';  // blk.0.Xttn_k.weight
  std::string e = load_error(tmp, b);
  EXPECT_NE(e.find("unknown tensor 'blk.0.Xttn_k.weight'"), std::string::npos) << e;
  // q_norm ne[0] 16 -> 8: the config wants [16].
  const GgufTensorInfo& qn = info("blk.0.attn_q_norm.weight");
  b = bytes;
  poke<uint64_t>(b, qn.info_offset + 8 + qn.name.size() + 4, 8u);
  e = load_error(tmp, b);
  EXPECT_NE(e.find("'blk.0.attn_q_norm.weight' (HF model.language_model.layers.0.self_attn.q_norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("has shape [8], expected [16]"), std::string::npos) << e;
  // A missing tensor (attn_v on layer 0 renamed to an unused but known name is not possible;
  // rename post_norm -> proj to collide instead... use the rope check for the metadata side).
  const GgufTensorInfo& rf = info("rope_freqs.weight");
  b = bytes;
  const uint64_t rf_data = g->data_offset() + rf.offset;
  poke<float>(b, rf_data + 4 * 6, 1.0f);  // a stray 1.0 after the 1e30 run
  e = load_error(tmp, b);
  EXPECT_NE(e.find("rope_freqs.weight"), std::string::npos) << e;
}

TEST_F(GgufRefusal, MetadataProblems) {
  const GgufValue* arch = g->find("general.architecture");
  std::string b = bytes;
  b[size_t(arch->offset + 8)] = 'l';  // "gemma4" -> "lemma4"
  EXPECT_NE(load_error(tmp, b).find("gemma4 architecture only"), std::string::npos);
  const GgufValue* ff = g->find("gemma4.feed_forward_length");
  ASSERT_EQ(ff->type, GgufType::ARRAY);
  b = bytes;
  poke<int32_t>(b, ff->offset + 12 + 4 * 7, 300);  // layer 7 width breaks the double-wide pattern
  std::string e = load_error(tmp, b);
  EXPECT_NE(e.find("gemma4.feed_forward_length"), std::string::npos) << e;
  EXPECT_NE(e.find("layer 7"), std::string::npos) << e;
}

// ---- writer ----

TEST(GgufWriter, RoundTripsValuesAndTensors) {
  test::TempDir tmp;
  GgufWriter w;
  w.set_string("general.architecture", "test");
  w.set_u32("a.u32", 7);
  w.set_i32("a.i32", -3);
  w.set_f32("a.f32", 1.5f);
  w.set_bool("a.bool", true);
  w.set_u64("a.u64", 1ull << 40);
  w.set_array_i32("a.arr", {1, -2, 3});
  w.set_array_string("a.strs", {"x", "", "yz"});
  w.set_array_bool("a.bools", {true, false});
  w.add_tensor("t.q8", DType::Q8_0, {2, 64});
  w.add_tensor("t.f", DType::F32, {3});
  w.write(tmp / "x.gguf", [&](size_t i, std::byte* out) {
    std::memset(out, int(i + 1), size_t(w.tensors()[i].nbytes));
  });
  auto g = GgufFile::open(tmp / "x.gguf");
  EXPECT_EQ(g->get_int("a.u32"), 7);
  EXPECT_EQ(g->get_int("a.i32"), -3);
  EXPECT_EQ(g->get_float("a.f32"), 1.5);
  EXPECT_EQ(g->get_bool("a.bool"), true);
  EXPECT_EQ(g->find("a.u64")->u, 1ull << 40);
  EXPECT_EQ(g->find("a.arr")->int_at(1), -2);
  EXPECT_EQ(g->find("a.strs")->strings[2], "yz");
  EXPECT_EQ(g->find("a.bools")->int_at(0), 1);
  EXPECT_THROW(g->get_int("a.f32"), Error);
  const TensorView& q = g->tensors().at("t.q8");
  EXPECT_EQ(q.dtype, DType::Q8_0);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(q.nbytes, 2u * 2 * 34);
  EXPECT_EQ(uint8_t(q.data[0]), 1);
  EXPECT_EQ(g->tensors().at("t.f").file_offset % 32, 0u);
  EXPECT_FALSE(std::filesystem::exists(tmp / "x.gguf.tmp"));
}

TEST(GgufWriter, NestedArraysAreReadAndCopied) {
  test::TempDir tmp;
  // Hand-built: key "n" = array of 2 arrays of u8.
  GgufWriter w0;
  w0.set_u32("x", 1);
  w0.write(tmp / "a.gguf", [](size_t, std::byte*) {});
  std::string b = test::read_file(tmp / "a.gguf");
  std::string kv;
  auto raw64 = [&](uint64_t v) { kv.append(reinterpret_cast<const char*>(&v), 8); };
  auto raw32 = [&](uint32_t v) { kv.append(reinterpret_cast<const char*>(&v), 4); };
  raw64(1);
  kv += "n";
  raw32(9);
  raw32(9);
  raw64(2);
  for (int k = 0; k < 2; ++k) {
    raw32(0);
    raw64(3);
    kv += std::string(3, char(k + 5));
  }
  b.insert(24, kv);
  uint64_t nkv = 3;
  std::memcpy(&b[16], &nkv, 8);
  test::write_file(tmp / "b.gguf", b);
  auto g = GgufFile::open(tmp / "b.gguf");
  const GgufValue* n = g->find("n");
  ASSERT_TRUE(n);
  ASSERT_EQ(n->arrays.size(), 2u);
  EXPECT_EQ(n->arrays[1].int_at(2), 6);
  GgufWriter w;
  w.set_value("copy", *n);
  w.write(tmp / "c.gguf", [](size_t, std::byte*) {});
  auto c = GgufFile::open(tmp / "c.gguf");
  EXPECT_EQ(c->find("copy")->arrays[0].int_at(0), 5);
  // Nesting deeper than the limit is refused, not recursed into without bound.
  std::string deep;
  auto d64 = [&](uint64_t v) { deep.append(reinterpret_cast<const char*>(&v), 8); };
  auto d32 = [&](uint32_t v) { deep.append(reinterpret_cast<const char*>(&v), 4); };
  d64(1);
  deep += "d";
  d32(9);
  for (int k = 0; k < 100; ++k) {
    d32(9);
    d64(1);
  }
  d32(0);
  d64(0);
  std::string b2 = test::read_file(tmp / "a.gguf");
  b2.insert(24, deep);
  std::memcpy(&b2[16], &nkv, 8);
  nkv = 3;
  test::write_file(tmp / "d.gguf", b2);
  EXPECT_THROW(GgufFile::open(tmp / "d.gguf"), Error);
}

// ---- g4's own GGUF copies of the fixtures ----

std::vector<float> all_logits(const Model& m, const std::filesystem::path& dir) {
  auto j = nlohmann::json::parse(test::read_file(dir / "expected.json"));
  std::vector<float> out;
  for (const auto& s : j["sequences"]) {
    const auto l = forward_reference(m, s["tokens"].get<std::vector<int>>());
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

float max_delta(const std::vector<float>& a, const std::vector<float>& b) {
  float w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

class GgufQuantized : public ::testing::TestWithParam<std::string> {};

// g4's own GGUF copies of the fixtures (written from hf/, re-read, run through the reference
// forward) against the F32 logits. These random tiny models amplify weight error: the README's
// own figure for merely rounding the weights to bf16 is 0.3-0.45 (tiny-e, tiny-31b) and 7.2
// (tiny-moe, whose expert choice flips), and g4 reproduces it (0.34 / 0.23 / 7.2). So the bounds
// are on the mean |delta| for every variant and on the max |delta| for the dense ones; the MoE
// max is reported, not bounded. Measured values (mean / max) are printed; bounds are ~1.5-2x them.
TEST_P(GgufQuantized, CopiesStayWithinStatedErrorOfF32) {
  const auto dir = fixture(GetParam());
  const bool moe = GetParam() == "tiny-moe";
  test::TempDir tmp;
  auto hf = load_model(dir / "hf");
  const auto base = all_logits(*hf, dir);
  struct Case {
    DType t;
    float mean_bound, max_bound;
  };
  const std::vector<Case> cases = {
      {DType::F32, 0.0f, 0.0f},    {DType::F16, 0.01f, 0.1f},   {DType::BF16, 0.4f, 0.6f},
      {DType::Q8_0, 0.25f, 2.5f},  {DType::Q4_0, 2.5f, 16.0f},  {DType::Q4_1, 2.5f, 14.0f},
      {DType::Q4_K, 0.25f, 2.5f},  {DType::Q5_K, 0.25f, 2.5f},  {DType::Q6_K, 0.25f, 2.5f}};
  for (const Case& c : cases) {
    const auto out = tmp / (std::string(dtype_name(c.t)) + ".gguf");
    const auto rep = write_model_gguf(*hf, c.t, out);
    auto q = load_model(out);
    const auto got = all_logits(*q, dir);
    double sum = 0;
    for (size_t i = 0; i < got.size(); ++i) sum += std::fabs(got[i] - base[i]);
    const float mean = float(sum / double(got.size())), mx = max_delta(got, base);
    std::printf("[ quantized ] %-8s %-4s |delta logit| vs F32: mean %.4g max %.4g  %s\n", GetParam().c_str(),
                std::string(dtype_name(c.t)).c_str(), mean, mx, rep.notes.empty() ? "" : rep.notes.back().c_str());
    EXPECT_LE(mean, c.mean_bound) << dtype_name(c.t);
    if (!moe) {
      EXPECT_LE(mx, c.max_bound) << dtype_name(c.t);
    }
    if (c.t == DType::F32) {
      EXPECT_EQ(mx, 0.0f);
      EXPECT_EQ(q->weights.bound_bytes, hf->weights.bound_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GgufQuantized, ::testing::Values("tiny-e", "tiny-31b", "tiny-moe"));

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// K-quants need rows that are multiples of 256, which the 64-wide fixtures lack: a synth
// model 256 wide (every matrix row a whole number of 256-blocks except PLE's 16-wide
// projection) checks them end to end. Error must shrink with bits: Q4_K > Q5_K > Q6_K > Q8_0.
TEST(GgufQuantizedWide, KQuantsOrderedByBits) {
  test::TempDir tmp;
  const ModelConfig c = test::kquant_wide_tiny_e();
  SynthOptions so;
  write_synth_checkpoint(c, so, tmp / "hf");
  auto hf = load_model(tmp / "hf");
  std::vector<int> toks;
  for (int i = 0; i < 24; ++i) toks.push_back(5 + (i * 37) % 500);
  const auto base = forward_reference(*hf, toks);
  std::vector<std::pair<DType, double>> mean;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0}) {
    const auto out = tmp / (std::string(dtype_name(t)) + ".gguf");
    const auto rep = write_model_gguf(*hf, t, out);
    EXPECT_GT(rep.tensors_by_dtype.at(std::string(dtype_name(t))), 50u) << dtype_name(t);
    auto q = load_model(out);
    const auto got = forward_reference(*q, toks);
    double sum = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      sum += std::fabs(got[i] - base[i]);
      ref += std::fabs(base[i]);
    }
    mean.push_back({t, sum / ref});
    std::printf("[ quantized wide ] %-4s mean |delta| / mean |logit| = %.4f, max |delta| = %.4g\n",
                std::string(dtype_name(t)).c_str(), sum / ref, max_delta(got, base));
  }
  EXPECT_GT(mean[0].second, mean[1].second);
  EXPECT_GT(mean[1].second, mean[2].second);
  EXPECT_GT(mean[2].second, mean[3].second);
  // Measured 0.45 / 0.27 / 0.13 / 0.036: random weights amplify error (cf. bf16 on the fixtures).
  EXPECT_LT(mean[0].second, 0.7);  // Q4_K
  EXPECT_LT(mean[2].second, 0.2);  // Q6_K
}

// Q4_K_M as llama.cpp picks it, worked by hand: with 16 layers of ffn_down the more-bits rule
// takes indices 0, 1 (first eighth), 14, 15 (last eighth) and 4, 7, 10, 13 (every third between);
// with attn_v in only the first 10 layers (the others share their KV), 0, 8, 9 and 3, 6. The
// tied embedding table is the head, so it takes Q6_K; with an output.weight that one does.
TEST(GgufQ4KM, TypesFollowLlamaCppsMix) {
  std::vector<std::string> names{"token_embd.weight", "per_layer_token_embd.weight"};
  for (int l = 0; l < 16; ++l) {
    names.push_back("blk." + std::to_string(l) + ".ffn_down.weight");
    names.push_back("blk." + std::to_string(l) + ".ffn_up.weight");
    if (l < 10) names.push_back("blk." + std::to_string(l) + ".attn_v.weight");
  }
  const auto types = q4_k_m_types(names);
  ASSERT_EQ(types.size(), names.size());
  EXPECT_EQ(types.at("token_embd.weight"), DType::Q6_K);
  EXPECT_EQ(types.at("per_layer_token_embd.weight"), DType::Q4_K);
  const std::set<int> down{0, 1, 4, 7, 10, 13, 14, 15}, v{0, 3, 6, 8, 9};
  for (int l = 0; l < 16; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(types.at(b + "ffn_down.weight"), down.count(l) ? DType::Q6_K : DType::Q4_K) << l;
    EXPECT_EQ(types.at(b + "ffn_up.weight"), DType::Q4_K) << l;
    if (l < 10) {
      EXPECT_EQ(types.at(b + "attn_v.weight"), v.count(l) ? DType::Q6_K : DType::Q4_K) << l;
    }
  }
  names.push_back("output.weight");
  const auto untied = q4_k_m_types(names);
  EXPECT_EQ(untied.at("output.weight"), DType::Q6_K);
  EXPECT_EQ(untied.at("token_embd.weight"), DType::Q4_K);
}

// End to end: the mix is written, loads, and its error sits between all-Q4_K's and all-Q6_K's.
TEST(GgufQ4KM, WrittenMixLoadsWithErrorBetweenQ4KAndQ6K) {
  test::TempDir tmp;
  const ModelConfig c = test::kquant_wide_tiny_e();
  write_synth_checkpoint(c, SynthOptions{}, tmp / "hf");
  auto hf = load_model(tmp / "hf");
  std::vector<int> toks;
  for (int i = 0; i < 24; ++i) toks.push_back(5 + (i * 37) % 500);
  const auto base = forward_reference(*hf, toks);
  auto err = [&](const Model& q) {
    const auto got = forward_reference(q, toks);
    double sum = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      sum += std::fabs(got[i] - base[i]);
      ref += std::fabs(base[i]);
    }
    return sum / ref;
  };
  EXPECT_THROW(write_model_gguf(*hf, DType::Q8_0, tmp / "bad.gguf", {}, QuantMix::Q4_K_M), Error);
  const auto rep = write_model_gguf(*hf, DType::Q4_K, tmp / "m.gguf", {}, QuantMix::Q4_K_M);
  EXPECT_GT(rep.tensors_by_dtype.at("Q6_K"), 1u);
  EXPECT_GT(rep.tensors_by_dtype.at("Q4_K"), rep.tensors_by_dtype.at("Q6_K"));
  auto mixed = load_model(tmp / "m.gguf");
  EXPECT_EQ(mixed->weights.embed_tokens->dtype, DType::Q6_K);  // the tied head
  write_model_gguf(*hf, DType::Q4_K, tmp / "q4k.gguf");
  write_model_gguf(*hf, DType::Q6_K, tmp / "q6k.gguf");
  const double e4 = err(*load_model(tmp / "q4k.gguf")), em = err(*mixed), e6 = err(*load_model(tmp / "q6k.gguf"));
  std::printf("[ q4_k_m ] mean |delta| / mean |logit|: Q4_K %.4f, Q4_K_M %.4f, Q6_K %.4f\n", e4, em, e6);
  EXPECT_LT(em, e4);
  EXPECT_GT(em, e6);
}

}  // namespace
}  // namespace g4
