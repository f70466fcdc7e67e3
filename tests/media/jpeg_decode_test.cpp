// JPEG decoding: colours survive (within lossy-coding error), every EXIF orientation turns the
// image upright as PIL.ImageOps.exif_transpose does, and the SOF size is checked against the
// pixel limit before decoding.
#include "media/jpeg_decode.h"

#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "image_encode.h"

namespace g4::media {
namespace jpeg_decode_test {

constexpr int kW = 32, kH = 16;  // landscape, so 5..8 visibly swap the sides

// The colour near the centre of each quadrant of img, as 0/1 per channel (lossy coding moves
// solid colours by a few levels only).
std::string quadrant_colour(const RgbImage& img, bool right, bool bottom) {
  const uint8_t* p = img.pixel(right ? img.width * 3 / 4 : img.width / 4, bottom ? img.height * 3 / 4 : img.height / 4);
  std::string s;
  for (int ch = 0; ch < 3; ++ch) {
    if (p[ch] > 40 && p[ch] < 215) return "unclear";
    s += p[ch] >= 128 ? '1' : '0';
  }
  return s;
}

// Quadrant colours read top-left, top-right, bottom-left, bottom-right.
std::string layout(const RgbImage& img) {
  return quadrant_colour(img, false, false) + " " + quadrant_colour(img, true, false) + " " +
         quadrant_colour(img, false, true) + " " + quadrant_colour(img, true, true);
}

// red 100, green 010, blue 001, yellow 110.
const char* const kUpright = "100 010 001 110";

TEST(JpegDecode, ColoursSurviveWithoutExif) {
  const RgbImage img = decode_image(media_test::encode_jpeg(media_test::quadrants(kW, kH), kW, kH));
  EXPECT_EQ(img.width, kW);
  EXPECT_EQ(img.height, kH);
  EXPECT_EQ(layout(img), kUpright);
}

TEST(JpegDecode, EveryExifOrientationIsTurnedUpright) {
  // What the stored quadrants look like after each transform (source: R G / B Y).
  const struct {
    int orientation;
    bool swaps;
    const char* layout;
  } cases[] = {
      {1, false, "100 010 001 110"},  // as stored
      {2, false, "010 100 110 001"},  // mirrored left-right
      {3, false, "110 001 010 100"},  // rotated 180
      {4, false, "001 110 100 010"},  // flipped top-bottom
      {5, true, "100 001 010 110"},   // transposed
      {6, true, "001 100 110 010"},   // rotated 90 clockwise
      {7, true, "110 010 001 100"},   // transversed
      {8, true, "010 110 100 001"},   // rotated 90 counter-clockwise
  };
  for (const auto& c : cases) {
    for (bool big_endian : {false, true}) {
      const auto file = media_test::encode_jpeg(media_test::quadrants(kW, kH), kW, kH, 95, media_test::exif_with_orientation(c.orientation, big_endian));
      const RgbImage img = decode_image(file);
      EXPECT_EQ(img.width, c.swaps ? kH : kW) << "orientation " << c.orientation;
      EXPECT_EQ(img.height, c.swaps ? kW : kH) << "orientation " << c.orientation;
      EXPECT_EQ(layout(img), c.layout) << "orientation " << c.orientation << (big_endian ? " (MM)" : " (II)");
    }
  }
}

TEST(JpegDecode, GreyscaleIsReplicatedToRgb) {
  const RgbImage img = decode_image(media_test::encode_jpeg(std::vector<uint8_t>(64, 200), 8, 8, 95, {}, 1));
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    EXPECT_NEAR(img.rgb[i], 200, 2);
    EXPECT_EQ(img.rgb[i], img.rgb[i + 1]);
    EXPECT_EQ(img.rgb[i], img.rgb[i + 2]);
  }
}

TEST(JpegDecode, PixelLimitRefusesFromTheFrameHeader) {
  std::vector<uint8_t> file = media_test::encode_jpeg(media_test::quadrants(16, 16), 16, 16);
  size_t sof = 0;
  for (size_t i = 2; i + 1 < file.size(); ++i)
    if (file[i] == 0xff && file[i + 1] == 0xc0) { sof = i; break; }
  ASSERT_GT(sof, 0u);
  // SOF0: ff c0, length (2), precision (1), height (2), width (2): claim 60000 x 60000.
  file[sof + 5] = 60000 >> 8, file[sof + 6] = 60000 & 0xff;
  file[sof + 7] = 60000 >> 8, file[sof + 8] = 60000 & 0xff;
  EXPECT_TRUE(media_test::refused_with(file, {"JPEG", "60000x60000", "over the limit"}));
}

}  // namespace jpeg_decode_test
}  // namespace g4::media
