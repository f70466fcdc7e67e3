// libFuzzer target: image bytes (PNG, JPEG, WebP, or anything) -> decode_image -> preprocess.
// Asserts: refusals are g4::Error with a message; an accepted image has a non-empty size within
// the pixel limit and exactly width x height x 3 bytes; preprocessing it at the smallest budget
// gives a patch grid, positions and soft-token count that agree with each other.
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "media/image_decode.h"
#include "media/image_processor.h"

using namespace g4;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 4 M pixels: big enough for every decoder path, small enough that one input stays well under
  // libFuzzer's -malloc_limit_mb and its 10 s timeout.
  const media::DecodeLimits limits{4u << 20};
  media::RgbImage img;
  try {
    img = media::decode_image(std::span<const uint8_t>(data, size), limits);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
    return 0;
  }
  G4_FUZZ_CHECK(img.width > 0 && img.height > 0);
  G4_FUZZ_CHECK(uint64_t(img.width) * img.height <= limits.max_pixels);
  G4_FUZZ_CHECK(img.rgb.size() == size_t(img.width) * img.height * 3);
  try {
    const media::ProcessedImage p = media::preprocess_image(img, 70, {4, 3});
    G4_FUZZ_CHECK(p.soft_tokens > 0 && p.soft_tokens <= 70);
    G4_FUZZ_CHECK(p.patches.count() == p.soft_tokens * 9);
    G4_FUZZ_CHECK(p.patches.positions.size() == size_t(p.patches.count()) * 2);
    G4_FUZZ_CHECK(p.patches.pixel_values.size() == size_t(p.patches.count()) * 48);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);  // an aspect ratio no size fits
  }
  return 0;
}
