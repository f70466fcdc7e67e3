// `g4 synth` with a vision tower: the written directory is a multimodal checkpoint the loaders
// read back as written (config, tensors, tokenizer ids), its tower runs, and `g4 generate` takes
// an image on it. The released presets' towers are checked against bind_vision_weights (the
// loader's own shape rules) without writing gigabytes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/presets.h"
#include "model/synth.h"
#include "model/vision_model.h"
#include "model/vision_interleave.h"
#include "model/vision_projector.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
const fs::path kImage = test::fixtures_dir() / "gemma4-vision-tiny" / "images" / "img0_exact_108x84.png";

// `g4 synth --preset tiny-e-vision --out dir`; returns its output (asserted to succeed).
std::string synth_tiny_vision(const fs::path& dir) {
  std::string out;
  EXPECT_EQ(0, test::g4_command("synth --preset tiny-e-vision --out " + dir.string(), &out)) << out;
  return out;
}

TEST(SynthVision, TinyPresetReadsBackAsWrittenAndTakesAnImage) {
  if (!fs::exists(kImage)) GTEST_SKIP() << "no fixture image at " << kImage;
  test::TempDir tmp;
  const fs::path dir = tmp / "tev";
  std::string out = synth_tiny_vision(dir);
  for (const char* f : {"config.json", "processor_config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;

  // The tower as written: the preset's config, every tensor bound (clamp bounds included).
  const auto vision = load_vision_model(dir);
  ASSERT_NE(vision, nullptr);
  const VisionConfig want = *preset_vision_config("tiny-e-vision");
  EXPECT_TRUE(vision->config == want);
  EXPECT_EQ(vision->config.hidden_size, 48);
  EXPECT_EQ(vision->config.default_output_length, 70);
  ASSERT_EQ(vision->weights.layers.size(), 2u);
  const ClippedLinear& q = vision->weights.layers[0].q_proj;
  EXPECT_TRUE(q.clipped);
  EXPECT_LT(q.input_min, q.input_max);
  EXPECT_LT(q.output_min, q.output_max);

  // config.json's image ids, the tokenizer's pieces and the text decoder agree.
  const auto model = load_model(dir);
  EXPECT_EQ(vision->text_hidden, model->config.hidden_size);
  ASSERT_TRUE(model->config.image_token_id && model->config.boi_token_id && model->config.eoi_token_id);
  const auto tok = text::Tokenizer::from_dir(dir);
  EXPECT_EQ(tok.vocab().find("<|image>"), *model->config.boi_token_id);
  EXPECT_EQ(tok.vocab().find("<|image|>"), *model->config.image_token_id);
  EXPECT_EQ(tok.vocab().find("<image|>"), *model->config.eoi_token_id);
  EXPECT_EQ(*model->config.image_token_id, 501);  // moved into the 512-id vocab
  const auto proc = nlohmann::json::parse(test::read_file(dir / "processor_config.json"));
  EXPECT_EQ(proc["image_processor"]["patch_size"], 4);
  EXPECT_EQ(proc["image_processor"]["max_soft_tokens"], 70);

  // The tower runs: img0 (108x84 at budget 70) becomes 63 soft tokens of width H, finite and not
  // constant.
  // (The fixture's preprocessed rows for img0: patch 4, budget 70, as this tower's.)
  const fs::path stem = kImage.parent_path() / "img0_exact_108x84";
  const auto pixels = test::read_f32(stem.string() + ".pixel_values.f32");
  const auto positions = test::read_i32(stem.string() + ".position_ids.i32");
  int cols = 0, rows = 0;
  for (size_t i = 0; i + 1 < positions.size(); i += 2) {
    cols = std::max(cols, positions[i] + 1);
    rows = std::max(rows, positions[i + 1] + 1);
  }
  const size_t n = size_t(rows) * size_t(cols);  // the fixture pads to the budget's 630 patches
  const VisionInput in{std::span<const float>(pixels).first(n * 48), std::span<const int32_t>(positions).first(n * 2),
                       rows, cols};
  const blocks::Vec ref = encode_image(vision->config, vision->weights, in, blocks::Exec{});
  ASSERT_EQ(ref.size(), size_t(63 * model->config.hidden_size));
  double sum = 0, sq = 0;
  for (float x : ref) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += double(x) * x;
  }
  EXPECT_GT(sq / double(ref.size()) - (sum / double(ref.size())) * (sum / double(ref.size())), 1e-3);

  // g4 generate takes the image and counts its soft tokens.
  ASSERT_EQ(0, test::g4_command("generate --model " + dir.string() + " --chat --prompt hi -n 2 --image " +
                                    kImage.string(),
                                &out))
      << out;
  EXPECT_NE(out.find("images: 1, 63 soft tokens"), std::string::npos) << out;
}

// The tower's BF16 matrices interleaved for VDPBF16PS give the soft tokens of the row-major
// layout on the same kernels, within f32 rounding (the fixture tests' bound, 1e-4 · max|x|).
TEST(SynthVision, InterleavedTowerMatchesRowMajor) {
  test::TempDir tmp;
  const fs::path dir = tmp / "tevb";
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e-vision --dtype bf16 --out " + dir.string(), &out)) << out;
  ThreadPool pool(2);
  const ops::MatmulContext mm = ops::make_matmul_context(&pool, host_cpu(), 96, true, false);
  if (!ops::reads_bf16_interleaved(mm)) GTEST_SKIP() << "this CPU's products do not read BF16_R16";
  blocks::Exec ex;
  ex.matmul = &mm;
  const auto plain = load_vision_model(dir), inter = load_vision_model(dir);
  const InterleaveReport r = interleave_vision_weights(*inter, &pool);
  EXPECT_EQ(r.tensors, 2 + 7 * 2);  // input_proj, embedding_projection, 7 linears per layer
  EXPECT_EQ(inter->weights.layers[1].down_proj.weight->dtype, DType::BF16_R16);
  // A 6 x 6 patch grid of deterministic pixels (36 patches, 4 soft tokens).
  std::vector<float> px(36 * 48);
  for (size_t i = 0; i < px.size(); ++i) px[i] = float((i * 37) % 256) / 255.0f;
  std::vector<int32_t> pos;
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 6; ++x) pos.insert(pos.end(), {x, y});
  const VisionInput in{px, pos, 6, 6};
  const blocks::Vec a = encode_image(plain->config, plain->weights, in, ex);
  const blocks::Vec b = encode_image(inter->config, inter->weights, in, ex);
  ASSERT_EQ(a.size(), b.size());
  float worst = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  EXPECT_LE(worst, 1e-4f * scale);
}

// g4 bench --image / --image-size on the tiny preset: every figure is there and consistent with the
// image's own arithmetic (no timing is asserted).
TEST(SynthVision, BenchReportsEachImage) {
  if (!fs::exists(kImage)) GTEST_SKIP() << "no fixture image at " << kImage;
  test::TempDir tmp;
  const fs::path dir = tmp / "tev";
  std::string out = synth_tiny_vision(dir);
  int rc = -1;
  const fs::path json_file = tmp / "b.json";
  out = test::g4_quick_bench(dir.string(),
                             "--repeat 2 --image " + kImage.string() + " --image-size 96x64 --json " + json_file.string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("vision tower:"), std::string::npos) << out;
  EXPECT_NE(out.find("one-image chat TTFT"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(test::read_file(json_file))["vision"];
  EXPECT_GT(j["peak_gops"].get<double>(), 0);
  ASSERT_EQ(j["images"].size(), 2u);
  // img0 is 84 wide, 108 high, at budget 70: 21 x 27 patches of 4 pixels, 63 soft tokens (the fixture's counts).
  const auto& f = j["images"][0];
  EXPECT_EQ(f["budget"], 70);
  EXPECT_EQ(f["width"], 84);
  EXPECT_EQ(f["height"], 108);
  EXPECT_EQ(f["patches"], 567);
  EXPECT_EQ(f["soft_tokens"], 63);
  // The synthetic image: 96x64 scaled to fill budget 70 (120x72: 30 x 18 patches, 60 soft tokens).
  const auto& s = j["images"][1];
  EXPECT_EQ(s["source"], "synthetic 96x64");
  EXPECT_EQ(s["decode_ms"], 0.0);
  EXPECT_EQ(s["resized_width"].get<int>() * s["resized_height"].get<int>() / 16, s["patches"].get<int>());
  EXPECT_EQ(s["soft_tokens"].get<int>() * 9, s["patches"].get<int>());
  for (const auto& im : j["images"]) {
    ASSERT_EQ(im["encoder_runs"].size(), 2u);
    const double med = im["encoder_ms_median"], lo = im["encoder_ms_min"], hi = im["encoder_ms_max"];
    EXPECT_LE(lo, med);
    EXPECT_LE(med, hi);
    EXPECT_GT(im["weight_products_ms"].get<double>(), 0);
    EXPECT_GT(im["attention_ms"].get<double>(), 0);
    EXPECT_LE(im["weight_products_ms"].get<double>() + im["attention_ms"].get<double>(), med * 1.001);
    EXPECT_GT(im["products_fraction_of_peak"].get<double>(), 0);
    EXPECT_NEAR(im["patches_per_s"].get<double>(), im["patches"].get<double>() / (med * 1e-3), 1e-6 * im["patches_per_s"].get<double>());
    // The TTFT prompt: <bos>, <|image>, the soft tokens, <image|> and 8 text tokens.
    EXPECT_EQ(im["ttft_prompt_tokens"].get<int>(), im["soft_tokens"].get<int>() + 11);
    EXPECT_GT(im["ttft_s"].get<double>(), 0);
    EXPECT_GT(im["ttft_vision_s"].get<double>(), 0);  // cold: the tower ran
  }
}

// The released towers: config.json's vision_config parses back to the preset, the text config
// carries the released image ids, and the tensor list binds under the loader's shape checks.
TEST(SynthVision, ReleasedPresetsParseBackAndBind) {
  for (const std::string name : {"e2b-vision", "e4b-vision", "26b-a4b-vision", "31b-vision"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = preset_config(name);
    const VisionConfig v = *preset_vision_config(name);
    nlohmann::json root = config_to_json(c);
    root["vision_config"] = vision_config_to_json(v);
    EXPECT_TRUE(*parse_vision_config(root, name) == v);
    EXPECT_EQ(v.default_output_length, 280);
    EXPECT_EQ(root["image_token_id"], 258880);
    EXPECT_EQ(root["boi_token_id"], 255999);
    EXPECT_EQ(root["eoi_token_id"], 258882);
    EXPECT_EQ(c.vision_bidirectional(), name == "26b-a4b-vision" || name == "31b-vision");

    const auto specs = vision_tensor_specs(v, c.hidden_size, DType::BF16);
    uint64_t largest = 0;
    for (const auto& s : specs) largest = std::max(largest, s.nbytes());
    std::vector<std::byte> zeros(largest);
    const float lo = -1, hi = 1;
    std::map<std::string, TensorView> views;
    for (const auto& s : specs) {
      TensorView t{s.name, "synth", s.dtype, s.shape, zeros.data(), s.nbytes(), 0};
      if (s.shape.empty()) t.data = reinterpret_cast<const std::byte*>(s.name.find("_min") != std::string::npos ? &lo : &hi);
      views.emplace(s.name, t);
    }
    const VisionWeights w = bind_vision_weights(v, c.hidden_size, views, name);
    EXPECT_EQ(w.layers.size(), size_t(v.num_hidden_layers));
    EXPECT_EQ(w.layers[0].gate_proj.clipped, v.use_clipped_linears);
    EXPECT_EQ(w.std_scale != nullptr, v.standardize);
  }
  EXPECT_THROW(preset_vision_config("12b-vision"), Error);
  EXPECT_EQ(preset_vision_config("e2b"), std::nullopt);
}

}  // namespace
}  // namespace g4
