// Every image of ../shared/fixtures/gemma4-vision-tiny through decode + processor, against the
// independent float64 reference (its README says how to compare): target size, patch grid,
// soft-token count and positions exact; the resize within one level (today it matches exactly);
// pixel_values computed from the fixture's resized pixels bit-exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "media/bicubic_resize.h"
#include "media/image_decode.h"
#include "media/image_processor.h"
#include "test_util.h"

namespace g4::media {
namespace image_fixture_test {

namespace fs = std::filesystem;

struct FixtureImage {
  std::string stem;
  int h0, w0, h, w, soft_tokens;
};

// The README's table; the tiny towers have patch 4, pooling 3, budget 70 (max_patches 630).
const FixtureImage kImages[] = {
    {"img0_exact_108x84", 108, 84, 108, 84, 63},
    {"img1_wide_60x150", 60, 150, 60, 156, 65},
    {"img2_small_30x40", 30, 40, 84, 108, 63},
    {"img3_rings_200x200", 200, 200, 96, 96, 64},
};
constexpr PatchGeometry kTiny{4, 3};
constexpr int kBudget = 70;
constexpr int kMaxPatches = 630;

fs::path images_dir() { return g4::test::fixtures_dir() / "gemma4-vision-tiny" / "images"; }

std::vector<uint8_t> bytes_of(const fs::path& p) {
  const std::string s = g4::test::read_file(p);
  return std::vector<uint8_t>(s.begin(), s.end());
}

template <class T>
std::vector<T> raw_of(const fs::path& p) {
  const std::string s = g4::test::read_file(p);
  std::vector<T> v(s.size() / sizeof(T));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

class FixtureImages : public ::testing::TestWithParam<FixtureImage> {
 protected:
  void SetUp() override {
    if (!fs::exists(images_dir())) GTEST_SKIP() << "no fixtures at " << images_dir();
  }
};

TEST_P(FixtureImages, DecodesThePngToTheStoredRgb) {
  const FixtureImage& f = GetParam();
  const RgbImage img = decode_image(bytes_of(images_dir() / (f.stem + ".png")));
  EXPECT_EQ(img.height, f.h0);
  EXPECT_EQ(img.width, f.w0);
  EXPECT_EQ(img.rgb, bytes_of(images_dir() / (f.stem + ".rgb.u8")));
}

TEST_P(FixtureImages, TargetSizePatchesAndSoftTokensAreExact) {
  const FixtureImage& f = GetParam();
  const ProcessedImage p = preprocess_image(decode_image(bytes_of(images_dir() / (f.stem + ".png"))), kBudget, kTiny);
  EXPECT_EQ(p.resized.height, f.h);
  EXPECT_EQ(p.resized.width, f.w);
  EXPECT_EQ(p.patches.patches_y, f.h / 4);
  EXPECT_EQ(p.patches.patches_x, f.w / 4);
  EXPECT_EQ(p.soft_tokens, f.soft_tokens);
  const std::vector<int32_t> pos = raw_of<int32_t>(images_dir() / (f.stem + ".position_ids.i32"));
  ASSERT_EQ(pos.size(), size_t{kMaxPatches} * 2);
  const size_t n = p.patches.count();
  EXPECT_EQ(std::vector<int32_t>(pos.begin(), pos.begin() + n * 2), p.patches.positions);
  EXPECT_EQ(pos[n * 2], -1) << "the fixture pads after exactly n_patches rows";
}

TEST_P(FixtureImages, ResizeIsWithinOneLevelOfTheReference) {
  const FixtureImage& f = GetParam();
  const RgbImage src = decode_image(bytes_of(images_dir() / (f.stem + ".png")));
  const std::vector<uint8_t> expected = bytes_of(images_dir() / (f.stem + ".resized.rgb.u8"));
  const RgbImage got = preprocess_image(src, kBudget, kTiny).resized;
  ASSERT_EQ(got.rgb.size(), expected.size());
  int worst = 0;
  size_t off_by_one = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const int d = std::abs(int(got.rgb[i]) - int(expected[i]));
    worst = std::max(worst, d);
    off_by_one += d == 1;
  }
  EXPECT_LE(worst, 1) << f.stem;
  // Float rounding may move a value sitting on .5 by one level; anything more is a real difference.
  EXPECT_LE(off_by_one, expected.size() / 1000) << f.stem;
}

TEST_P(FixtureImages, PixelValuesFromTheResizedPixelsAreExact) {
  const FixtureImage& f = GetParam();
  RgbImage resized{f.w, f.h, bytes_of(images_dir() / (f.stem + ".resized.rgb.u8"))};
  const ProcessedImage p = preprocess_image(resized, kBudget, kTiny);
  EXPECT_EQ(p.resized.rgb, resized.rgb) << "an image at the target size passes untouched";
  const std::vector<float> expected = raw_of<float>(images_dir() / (f.stem + ".pixel_values.f32"));
  ASSERT_EQ(expected.size(), size_t{kMaxPatches} * 48);
  ASSERT_EQ(p.patches.pixel_values.size(), size_t(p.patches.count()) * 48);
  for (size_t i = 0; i < p.patches.pixel_values.size(); ++i)
    ASSERT_EQ(p.patches.pixel_values[i], expected[i]) << f.stem << " value " << i;
  for (size_t i = p.patches.pixel_values.size(); i < expected.size(); ++i)
    ASSERT_EQ(expected[i], 0.0f) << "padding rows are zero";
}

INSTANTIATE_TEST_SUITE_P(Tiny, FixtureImages, ::testing::ValuesIn(kImages),
                         [](const auto& param_info) { return param_info.param.stem; });

}  // namespace image_fixture_test
}  // namespace g4::media
