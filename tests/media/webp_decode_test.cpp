// WebP decoding: lossless RGB exactly, lossy within coding error, the pixel limit from the
// VP8L header before decoding, and animated files refused by name.
#include "media/webp_decode.h"

#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "image_encode.h"

namespace g4::media {
namespace webp_decode_test {

TEST(WebpDecode, LosslessRgbAndOpaqueRgbaRoundTripExactly) {
  const std::vector<uint8_t> px = media_test::quadrants(12, 10);
  std::vector<uint8_t> rgba;  // the same pixels with alpha 255: composited, they stay as they are
  for (size_t i = 0; i < px.size(); i += 3) rgba.insert(rgba.end(), {px[i], px[i + 1], px[i + 2], 255});
  EXPECT_TRUE(media_test::decodes_to(media_test::encode_webp_lossless(px, 12, 10, false), px, 12, 10));
  EXPECT_TRUE(media_test::decodes_to(media_test::encode_webp_lossless(rgba, 12, 10, true), px, 12, 10));
}

TEST(WebpDecode, LossyKeepsColoursClose) {
  const std::vector<uint8_t> px = media_test::quadrants(32, 32);
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeRGB(px.data(), 32, 32, 32 * 3, 90, &buf);
  const std::vector<uint8_t> file(buf, buf + n);
  WebPFree(buf);
  const RgbImage img = decode_image(file);
  ASSERT_EQ(img.rgb.size(), px.size());
  const uint8_t* centre = img.pixel(8, 8);  // inside the red quadrant
  EXPECT_GT(centre[0], 200);
  EXPECT_LT(centre[1], 60);
}

TEST(WebpDecode, PixelLimitRefusesFromTheHeader) {
  // VP8L header at byte 21: 14-bit width-1 and height-1 packed little-endian; claim 16384 x 16384.
  std::vector<uint8_t> file = media_test::encode_webp_lossless(media_test::quadrants(4, 4), 4, 4, false);
  ASSERT_EQ(file[20], 0x2f);
  const uint32_t bits = (16383u) | (16383u << 14) | (uint32_t(file[24] & 0xf0) << 24);
  for (int i = 0; i < 4; ++i) file[21 + i] = static_cast<uint8_t>(bits >> (8 * i));
  EXPECT_TRUE(media_test::refused_with(file, {"WebP", "16384x16384", "over the limit"}));
}

TEST(WebpDecode, AnimatedIsRefusedByName) {
  // A VP8X header with the animation flag set, then an ANIM chunk: enough for the feature probe.
  const std::vector<uint8_t> file = {'R', 'I', 'F', 'F', 30, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0,
                                     0x02, 0, 0, 0, 3, 0, 0, 3, 0, 0, 'A', 'N', 'I', 'M', 6, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(media_test::refused_with(file, {"WebP", "animated"}));
}

}  // namespace webp_decode_test
}  // namespace g4::media
