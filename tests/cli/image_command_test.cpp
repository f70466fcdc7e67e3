// `g4 logits --image` and `g4 tokenize --chat` with image parts, from the PNG files: decoding,
// preprocessing, the tower and the decoder together against the vision fixture's float64 logits
// (an independent implementation); spans that do not fit their image are refused with both counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "text/synth_tokenizer.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = test::fixtures_dir() / "gemma4-vision-tiny";

std::string token_list(const std::vector<int>& tokens) {
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  return list;
}

std::string images_flags(const nlohmann::json& seq) {
  std::string flags;
  for (const auto& name : seq["images"]) flags += " --image " + (kFixture / "images" / (name.get<std::string>() + ".png")).string();
  return flags;
}

class ImageCommands : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fs::exists(kFixture / GetParam() / "manifest.json")) GTEST_SKIP() << "no fixtures at " << kFixture;
  }
};

TEST_P(ImageCommands, LogitsFromThePngFilesMatchTheFixture) {
  const fs::path dir = kFixture / GetParam();
  const auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  test::TempDir tmp;
  for (const char* seq_name : {"two_images", "one_image"}) {
    const auto& seq = m["sequences"][seq_name];
    const auto tokens = test::read_i32(dir / "expected" / seq["tokens"]["file"].get<std::string>());
    const auto want = test::read_f32(dir / "expected" / seq["logits"]["file"].get<std::string>());
    // The reference loops over the whole sequence, and the SIMD kernels through the cache in chunks
    // (a chunk cutting an image is refused under the "vision" rule, so those take the image whole).
    for (const std::string mode : {"--mode full", "--mode chunked --chunk 200 --threads 2 --compute f32 --kv f32"}) {
      const fs::path out_file = tmp / "l.f32";
      std::string out;
      ASSERT_EQ(0, test::g4_command("logits --model " + (dir / "hf").string() + " --tokens " + token_list(tokens) +
                                        images_flags(seq) + " " + mode + " --out " + out_file.string(),
                                    &out))
          << out;
      const auto got = test::read_f32(out_file);
      ASSERT_EQ(got.size(), want.size());
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, 1e-3f) << seq_name << " " << mode;  // the fixture's bound
    }
  }
}

TEST_P(ImageCommands, ASpanThatDoesNotFitItsImageIsRefusedWithBothCounts) {
  const fs::path dir = kFixture / GetParam();
  const auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  const auto tokens = test::read_i32(dir / "expected" / m["sequences"]["one_image"]["tokens"]["file"].get<std::string>());
  std::string out;
  // img0 has 63 soft tokens; one_image's span holds img3's 64.
  EXPECT_NE(0, test::g4_command("logits --model " + (dir / "hf").string() + " --tokens " + token_list(tokens) + " --image " +
                                    (kFixture / "images" / "img0_exact_108x84.png").string(),
                                &out));
  EXPECT_NE(out.find("has 63 soft tokens but its span at index 7 holds 64"), std::string::npos) << out;
  // A budget Gemma 4 does not have is refused naming the flag and the allowed set.
  EXPECT_NE(0, test::g4_command("logits --model " + (dir / "hf").string() + " --tokens " + token_list(tokens) + " --image " +
                                    (kFixture / "images" / "img0_exact_108x84.png").string() + " --image-tokens 100",
                                &out));
  EXPECT_NE(out.find("--image-tokens 100: image token budget 100 is not one of 70, 140, 280, 560, 1120"), std::string::npos)
      << out;
}

TEST_P(ImageCommands, TokenizeExpandsTheChatsImages) {
  const fs::path dir = kFixture / GetParam();
  test::TempDir tmp;
  // A tokenizer.json beside a copy of the checkpoint's config, holding the fixture's moved image tokens.
  const fs::path model = tmp / "m";
  fs::create_directories(model);
  fs::copy_file(dir / "hf" / "config.json", model / "config.json");
  text::write_synth_tokenizer(model, 512, {{500, "<|image>"}, {501, "<|image|>"}, {502, "<image|>"}});
  const std::string png = test::read_file(kFixture / "images" / "img1_wide_60x150.png");
  const std::string b64 = test::base64(png);
  const nlohmann::json chat = {{{"role", "user"},
                                {"content", {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + b64}}}},
                                             {{"type", "text"}, {"text", "hi"}}}}}};
  test::write_file(tmp / "chat.json", chat.dump());
  std::string out;
  ASSERT_EQ(0, test::g4_command("tokenize --model " + model.string() + " --chat " + (tmp / "chat.json").string(), &out)) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  const auto ids = j["ids"].get<std::vector<int>>();
  // img1 (60x150) at budget 70: 15x39 patches, 65 soft tokens, right after <|image> (500).
  ASSERT_EQ(j["images"].size(), 1u);
  const int first = j["images"][0]["first"], count = j["images"][0]["count"];
  EXPECT_EQ(count, 65);
  ASSERT_GT(first, 0);
  EXPECT_EQ(ids[size_t(first - 1)], 500);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 501), 65);
  EXPECT_EQ(ids[size_t(first + count)], 502);
  // With --image-tokens 140 the same image takes more.
  ASSERT_EQ(0, test::g4_command("tokenize --model " + model.string() + " --image-tokens 140 --chat " + (tmp / "chat.json").string(), &out)) << out;
  EXPECT_GT(nlohmann::json::parse(out.substr(out.find('{')))["images"][0]["count"].get<int>(), 65);
}

INSTANTIATE_TEST_SUITE_P(Variants, ImageCommands, ::testing::Values("tiny-e-vision", "tiny-31b-vision"));

}  // namespace
}  // namespace g4
