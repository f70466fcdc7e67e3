// Format sniffing by magic bytes: the supported three, the named unsupported ones, and the
// messages decode_image gives for each.
#include "media/image_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode_test_util.h"

namespace g4::media {
namespace image_format_test {

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

TEST(ImageFormat, SniffsByMagicBytes) {
  EXPECT_EQ(sniff_image_format(bytes("\x89PNG\r\n\x1a\nrest")), ImageFormat::Png);
  EXPECT_EQ(sniff_image_format(bytes("\xff\xd8\xff\xe0")), ImageFormat::Jpeg);
  EXPECT_EQ(sniff_image_format(bytes(std::string("RIFF\0\0\0\0WEBPVP8 ", 16))), ImageFormat::WebP);
  EXPECT_EQ(sniff_image_format(bytes(std::string("RIFF\0\0\0\0WAVEfmt ", 16))), ImageFormat::Unknown);
  EXPECT_EQ(sniff_image_format(bytes("GIF89a...")), ImageFormat::Gif);
  EXPECT_EQ(sniff_image_format(bytes("GIF87a...")), ImageFormat::Gif);
  EXPECT_EQ(sniff_image_format(bytes("BM......")), ImageFormat::Bmp);
  EXPECT_EQ(sniff_image_format(bytes(std::string("II*\0", 4))), ImageFormat::Tiff);
  EXPECT_EQ(sniff_image_format(bytes(std::string("\0\0\0\x1c" "ftypheic", 12))), ImageFormat::Heif);
  EXPECT_EQ(sniff_image_format(bytes(std::string("\0\0\0\x1c" "ftypavif", 12))), ImageFormat::Avif);
  EXPECT_EQ(sniff_image_format(bytes("\x89PN")), ImageFormat::Unknown) << "too short for the signature";
  EXPECT_EQ(sniff_image_format({}), ImageFormat::Unknown);
}

TEST(ImageFormat, UnsupportedFormatsAreRefusedByName) {
  EXPECT_TRUE(media_test::refused_with(bytes("GIF89a\x01\x00\x01\x00"), {"GIF images are not supported", "PNG, JPEG or WebP"}));
  EXPECT_TRUE(media_test::refused_with(bytes("BM\x36\x00\x00\x00"), {"BMP images are not supported"}));
}

TEST(ImageFormat, UnknownBytesAreRefusedWithTheirFirstBytes) {
  EXPECT_TRUE(media_test::refused_with(bytes("hello world"), {"not a recognised format", "68 65 6c 6c 6f"}));
  EXPECT_TRUE(media_test::refused_with({}, {"empty"}));
}

}  // namespace image_format_test
}  // namespace g4::media
