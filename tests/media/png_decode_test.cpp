// PNG decoding: colour types to RGB the way Pillow + convert_to_rgb see them, the pixel limit
// checked from IHDR before any pixel memory, truncated and corrupt files refused by name.
#include "media/png_decode.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "decode_test_util.h"
#include "image_encode.h"

namespace g4::media {
namespace png_decode_test {

TEST(PngDecode, RgbRoundTripsExactly) {
  const std::vector<uint8_t> px = media_test::quadrants(10, 6);
  EXPECT_TRUE(media_test::decodes_to(media_test::encode_png(px, 10, 6, PNG_COLOR_TYPE_RGB), px, 10, 6));
}

TEST(PngDecode, GreyIsReplicatedToRgb) {
  const RgbImage img = decode_image(media_test::encode_png({0, 90, 255}, 3, 1, PNG_COLOR_TYPE_GRAY));
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{0, 0, 0, 90, 90, 90, 255, 255, 255}));
}

TEST(PngDecode, PaletteWithTransparencyIsLookedUpThenComposited) {
  media_test::PngExtras x;
  x.palette = {{10, 20, 30}, {0, 0, 0}, {200, 100, 50}};
  x.palette_alpha = {255, 0};  // entry 2 has no alpha entry: opaque
  const RgbImage img = decode_image(media_test::encode_png({0, 1, 2}, 3, 1, PNG_COLOR_TYPE_PALETTE, x));
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{10, 20, 30, 255, 255, 255, 200, 100, 50}));
}

TEST(PngDecode, GreyKeyIsTransparentButAnRgbKeyIsIgnoredAsPillowDoes) {
  media_test::PngExtras grey_key;
  grey_key.has_key = true;
  grey_key.key.gray = 0;
  EXPECT_EQ(decode_image(media_test::encode_png({0, 90}, 2, 1, PNG_COLOR_TYPE_GRAY, grey_key)).rgb,
            (std::vector<uint8_t>{255, 255, 255, 90, 90, 90}));
  media_test::PngExtras rgb_key;
  rgb_key.has_key = true;  // key (0, 0, 0): Pillow keeps mode RGB and convert_to_rgb leaves it
  EXPECT_EQ(decode_image(media_test::encode_png({0, 0, 0, 1, 2, 3}, 2, 1, PNG_COLOR_TYPE_RGB, rgb_key)).rgb,
            (std::vector<uint8_t>{0, 0, 0, 1, 2, 3}));
}

TEST(PngDecode, SixteenBitSamplesKeepTheirHighByte) {
  media_test::PngExtras x;
  x.bit_depth = 16;
  // One RGB pixel, big-endian samples 0x12ff, 0x8000, 0xfe01: Pillow reads 0x12, 0x80, 0xfe.
  const RgbImage img = decode_image(media_test::encode_png({0x12, 0xff, 0x80, 0x00, 0xfe, 0x01}, 1, 1, PNG_COLOR_TYPE_RGB, x));
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{0x12, 0x80, 0xfe}));
}

// A PNG that is only a signature and an IHDR declaring w x h (valid CRC), no pixel data.
std::vector<uint8_t> ihdr_only(uint32_t w, uint32_t h) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {w, h}) b.insert(b.end(), {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)});
  b.insert(b.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter variant, no interlace
  const uLong crc = crc32(0, b.data() + 12, 17);
  b.insert(b.end(), {uint8_t(crc >> 24), uint8_t(crc >> 16), uint8_t(crc >> 8), uint8_t(crc)});
  return b;
}

TEST(PngDecode, PixelLimitRefusesFromTheHeaderBeforeDecoding) {
  // 60000 x 60000 RGB would need 10.8 GB. The file has no IDAT, so a decoder that read on would
  // report missing data instead; the message must be about the limit.
  EXPECT_TRUE(media_test::refused_with(ihdr_only(60000, 60000), {"PNG", "60000x60000", "over the limit of 89478485 pixels"}));
  EXPECT_TRUE(media_test::refused_with(ihdr_only(20, 20), {"PNG", "20x20", "limit of 100 pixels"}, DecodeLimits{100}));
  // Under the limit the same header gets as far as the missing pixel data.
  EXPECT_TRUE(media_test::refused_with(ihdr_only(20, 20), {"PNG", "truncated"}));
}

TEST(PngDecode, ExactlyAtTheLimitIsAccepted) {
  const std::vector<uint8_t> file = media_test::encode_png(media_test::quadrants(10, 10), 10, 10, PNG_COLOR_TYPE_RGB);
  EXPECT_EQ(decode_image(file, DecodeLimits{100}).width, 10);
  EXPECT_TRUE(media_test::refused_with(file, {"over the limit of 99 pixels"}, DecodeLimits{99}));
}

}  // namespace png_decode_test
}  // namespace g4::media
