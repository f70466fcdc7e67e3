// Alpha over white with Pillow's integer arithmetic: the end points exactly, values in between
// against Pillow's results, and whole RGBA images through the PNG and WebP decoders.
#include "media/alpha_composite.h"

#include <gtest/gtest.h>

#include "image_encode.h"
#include "media/image_decode.h"

namespace g4::media {
namespace alpha_composite_test {

TEST(AlphaComposite, OpaqueKeepsTheColourTransparentIsWhite) {
  for (int c : {0, 1, 77, 254, 255}) {
    EXPECT_EQ(composite_on_white(static_cast<uint8_t>(c), 255), c);
    EXPECT_EQ(composite_on_white(static_cast<uint8_t>(c), 0), 255);
  }
}

TEST(AlphaComposite, HalfTransparentBlackMatchesPillow) {
  // Worked by hand through Pillow's AlphaComposite.c formula (7-bit fixed point, shifts for
  // /255). A float blend 255 * (1 - a/255) gives 127.5 at a = 128, whose rounding is a guess.
  EXPECT_EQ(composite_on_white(0, 128), 127);
  EXPECT_EQ(composite_on_white(0, 127), 128);
  EXPECT_EQ(composite_on_white(0, 1), 254);
  EXPECT_EQ(composite_on_white(200, 64), 241);
}

TEST(AlphaComposite, BlendIsMonotoneInAlpha) {
  for (int a = 1; a < 256; ++a) EXPECT_LE(composite_on_white(0, uint8_t(a)), composite_on_white(0, uint8_t(a - 1)));
}

TEST(AlphaComposite, RgbaPngAndWebpComeOutOverWhite) {
  // 2x1: opaque red, fully transparent green.
  const std::vector<uint8_t> rgba = {255, 0, 0, 255, 0, 255, 0, 0};
  for (const auto& file : {media_test::encode_png(rgba, 2, 1, PNG_COLOR_TYPE_RGB_ALPHA), media_test::encode_webp_lossless(rgba, 2, 1, true)}) {
    const RgbImage img = decode_image(file);
    ASSERT_EQ(img.width, 2);
    EXPECT_EQ(img.rgb, (std::vector<uint8_t>{255, 0, 0, 255, 255, 255}));
  }
}

TEST(AlphaComposite, GreyAlphaPngIsReplicatedThenComposited) {
  const std::vector<uint8_t> ga = {0, 128, 100, 255};  // [1, 2, 2]: half-transparent black, opaque grey
  const RgbImage img = decode_image(media_test::encode_png(ga, 2, 1, PNG_COLOR_TYPE_GRAY_ALPHA));
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{127, 127, 127, 100, 100, 100}));
}

}  // namespace alpha_composite_test
}  // namespace g4::media
