// Truncated and damaged files of every supported format: each cut and each byte flip is refused
// with a g4::Error naming the format and the problem, never a crash or a half-grey image.
#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "image_encode.h"

namespace g4::media {
namespace corrupt_image_test {

struct Sample {
  const char* format;
  std::vector<uint8_t> bytes;
};

std::vector<Sample> samples() {
  const std::vector<uint8_t> px = media_test::quadrants(24, 16);
  return {{"PNG", media_test::encode_png(px, 24, 16, PNG_COLOR_TYPE_RGB)},
          {"JPEG", media_test::encode_jpeg(px, 24, 16)},
          {"WebP", media_test::encode_webp_lossless(px, 24, 16, false)}};
}

TEST(CorruptImage, EveryCutIsRefusedAsTruncated) {
  for (const Sample& s : samples()) {
    ASSERT_NO_THROW(decode_image(s.bytes)) << s.format;
    // Every cut once the magic bytes are in (a shorter prefix is not recognisably the format).
    for (size_t cut = 12; cut < s.bytes.size(); ++cut) {
      const std::vector<uint8_t> part(s.bytes.begin(), s.bytes.begin() + cut);
      // WebP and JPEG can also notice the damage as a corrupt structure when a cut lands in a
      // header field; PNG and WebP mostly say "truncated".
      const auto r = media_test::refused_with(part, {std::string(s.format) + " image"});
      EXPECT_TRUE(r) << s.format << " cut at " << cut << " of " << s.bytes.size();
    }
  }
}

TEST(CorruptImage, CutsInThePixelDataSayTruncated) {
  for (const Sample& s : samples()) {
    for (size_t cut : {s.bytes.size() / 2, s.bytes.size() * 3 / 4, s.bytes.size() - 3}) {
      const std::vector<uint8_t> part(s.bytes.begin(), s.bytes.begin() + cut);
      EXPECT_TRUE(media_test::refused_with(part, {s.format, "truncated"})) << s.format << " cut at " << cut;
    }
  }
}

TEST(CorruptImage, PngByteFlipsAnywhereAfterTheSignatureAreCaughtByTheCrcs) {
  const std::vector<uint8_t> png = samples()[0].bytes;
  for (size_t i = 8; i < png.size(); ++i) {
    std::vector<uint8_t> bad = png;
    bad[i] ^= 0x5a;
    EXPECT_TRUE(media_test::refused_with(bad, {"PNG image"})) << "flip at " << i;
  }
}

TEST(CorruptImage, JpegHeaderDamageIsRefusedAsCorrupt) {
  const std::vector<uint8_t> jpg = samples()[1].bytes;
  // Find the SOF0 marker (ff c0): its precision byte (8) follows the 2-byte length.
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpg.size(); ++i)
    if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) { sof = i; break; }
  ASSERT_GT(sof, 0u);
  std::vector<uint8_t> bad = jpg;
  bad[sof + 4] = 13;  // sample precision 13 bits
  EXPECT_TRUE(media_test::refused_with(bad, {"JPEG image is corrupt", "precision"}));
  bad = jpg;
  bad[sof + 9] = 0;  // zero components
  EXPECT_TRUE(media_test::refused_with(bad, {"JPEG image is corrupt"}));
}

TEST(CorruptImage, WebpBitstreamDamageIsRefused) {
  const std::vector<uint8_t> webp = samples()[2].bytes;
  // Byte 20 is the VP8L signature 0x2f; lossless data after it has no checksum, but the
  // signature and the header fields are validated.
  ASSERT_EQ(webp[20], 0x2f);
  std::vector<uint8_t> bad = webp;
  bad[20] = 0x00;
  EXPECT_TRUE(media_test::refused_with(bad, {"WebP image is corrupt"}));
}

TEST(CorruptImage, RandomFlipsNeverEscapeAsAnythingButAnImageOrAnError) {
  // Entropy-coded data without checksums (JPEG scans, WebP) may decode to other pixels after a
  // flip; what must never happen is a crash, a wrong size or another exception type.
  uint32_t state = 12345;
  for (const Sample& s : samples()) {
    for (int round = 0; round < 300; ++round) {
      std::vector<uint8_t> bad = s.bytes;
      for (int k = 0; k < 3; ++k) {
        state = state * 1664525u + 1013904223u;
        bad[12 + state % (bad.size() - 12)] ^= static_cast<uint8_t>(1u << (state >> 29));
      }
      try {
        const RgbImage img = decode_image(bad);
        EXPECT_EQ(img.rgb.size(), size_t(img.width) * img.height * 3) << s.format;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(s.format), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace corrupt_image_test
}  // namespace g4::media
