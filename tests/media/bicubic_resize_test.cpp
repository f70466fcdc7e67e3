// The antialiased bicubic resize on inputs whose answer is known without a reference: flat
// images stay flat, weights sum to one (no brightness drift), downscaling averages a
// checkerboard to grey instead of aliasing, and resizing to the same size is the identity.
#include "media/bicubic_resize.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace g4::media {
namespace bicubic_resize_test {

RgbImage filled(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  RgbImage img{w, h, {}};
  for (int i = 0; i < w * h; ++i) img.rgb.insert(img.rgb.end(), {r, g, b});
  return img;
}

TEST(BicubicResize, FlatImageStaysFlatUpAndDown) {
  const RgbImage src = filled(37, 23, 10, 128, 250);
  for (ImageSize s : {ImageSize{48, 96}, ImageSize{12, 12}, ImageSize{5, 200}}) {
    const RgbImage out = resize_bicubic_antialias(src, s);
    ASSERT_EQ(out.width, s.width);
    ASSERT_EQ(out.height, s.height);
    for (int y = 0; y < out.height; ++y)
      for (int x = 0; x < out.width; ++x) {
        ASSERT_EQ(out.pixel(x, y)[0], 10);
        ASSERT_EQ(out.pixel(x, y)[1], 128);
        ASSERT_EQ(out.pixel(x, y)[2], 250);
      }
  }
}

TEST(BicubicResize, SameSizeIsTheIdentity) {
  RgbImage src{16, 8, {}};
  for (int i = 0; i < 16 * 8 * 3; ++i) src.rgb.push_back(static_cast<uint8_t>(i * 37));
  EXPECT_EQ(resize_bicubic_antialias(src, {8, 16}).rgb, src.rgb);
}

TEST(BicubicResize, DownscalingACheckerboardAveragesInsteadOfAliasing) {
  // A 1-pixel checkerboard shrunk 8x: without the widened kernel each output would copy a few
  // source pixels (black, white or anything between); antialiased, every one lands near 127.5.
  RgbImage src{96, 96, {}};
  for (int y = 0; y < 96; ++y)
    for (int x = 0; x < 96; ++x) {
      const uint8_t v = (x + y) % 2 ? 255 : 0;
      src.rgb.insert(src.rgb.end(), {v, v, v});
    }
  const RgbImage out = resize_bicubic_antialias(src, {12, 12});
  for (uint8_t v : out.rgb) EXPECT_NEAR(v, 127.5, 3.0);
}

TEST(BicubicResize, UpscalingOvershootIsClampedNotWrapped) {
  // A hard black/white edge upscaled: the cubic overshoots past 0 and 255 and must clamp.
  RgbImage src{4, 1, {}};
  for (uint8_t v : {0, 0, 255, 255}) src.rgb.insert(src.rgb.end(), {v, v, v});
  const RgbImage out = resize_bicubic_antialias(src, {1, 32});
  EXPECT_EQ(out.pixel(0, 0)[0], 0);
  EXPECT_EQ(out.pixel(31, 0)[0], 255);
  for (int x = 1; x < 32; ++x) EXPECT_GE(out.pixel(x, 0)[0] + 2, out.pixel(x - 1, 0)[0]) << "monotone up to rounding at " << x;
}

}  // namespace bicubic_resize_test
}  // namespace g4::media
