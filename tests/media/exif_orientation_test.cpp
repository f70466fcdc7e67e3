// The EXIF parser on its own: both byte orders, the tag among others, and malformed payloads
// (cut, bad offsets, wrong type, out-of-range value) read as upright rather than refused.
#include "media/exif_orientation.h"

#include <gtest/gtest.h>

#include "image_encode.h"

namespace g4::media {
namespace exif_orientation_test {

TEST(ExifOrientation, ReadsTheTagInBothByteOrders) {
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(exif_orientation(media_test::exif_with_orientation(o, false)), o);
    EXPECT_EQ(exif_orientation(media_test::exif_with_orientation(o, true)), o);
  }
}

TEST(ExifOrientation, MalformedPayloadsMeanUpright) {
  const std::vector<uint8_t> good = media_test::exif_with_orientation(6);
  for (size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_EQ(exif_orientation(std::span(good).first(cut)), cut >= 26 ? 6 : 1) << "cut at " << cut;
  std::vector<uint8_t> bad = good;
  bad[10] = 0xff;  // IFD0 offset far past the end
  EXPECT_EQ(exif_orientation(bad), 1);
  bad = good;
  bad[18] = 4;  // type LONG instead of SHORT
  EXPECT_EQ(exif_orientation(bad), 1);
  bad = good;
  bad[24] = 9;  // orientation 9 does not exist
  EXPECT_EQ(exif_orientation(bad), 1);
  bad = good;
  bad[0] = 'X';  // not an EXIF APP1 (XMP uses APP1 too)
  EXPECT_EQ(exif_orientation(bad), 1);
}

TEST(ExifOrientation, TransformsMoveEachPixelWhereExifTransposeDoes) {
  // 3x2 image with pixel values = index: 0 1 2 / 3 4 5 (one channel shown, all three equal).
  RgbImage img{3, 2, {}};
  for (uint8_t v = 0; v < 6; ++v) img.rgb.insert(img.rgb.end(), {v, v, v});
  auto grey = [](const RgbImage& m) {
    std::vector<int> v;
    for (size_t i = 0; i < m.rgb.size(); i += 3) v.push_back(m.rgb[i]);
    return v;
  };
  EXPECT_EQ(grey(apply_exif_orientation(img, 1)), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 2)), (std::vector<int>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 3)), (std::vector<int>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 4)), (std::vector<int>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 5)), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 6)), (std::vector<int>{3, 0, 4, 1, 5, 2}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 7)), (std::vector<int>{5, 2, 4, 1, 3, 0}));
  EXPECT_EQ(grey(apply_exif_orientation(img, 8)), (std::vector<int>{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(apply_exif_orientation(img, 6).width, 2);
}

}  // namespace exif_orientation_test
}  // namespace g4::media
