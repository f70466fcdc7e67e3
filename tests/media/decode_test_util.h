// Helpers for the decoder tests: images with known content and an assertion that decoding
// refuses input with a g4::Error whose message holds the expected words.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "media/image_decode.h"
#include "platform/error.h"

namespace g4::media::media_test {

// [h, w, 3]: four solid quadrants (red, green / blue, yellow), so any flip or turn is visible
// even after lossy JPEG coding.
inline std::vector<uint8_t> quadrants(int w, int h) {
  std::vector<uint8_t> px;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const bool right = x >= w / 2, bottom = y >= h / 2;
      if (!bottom) px.insert(px.end(), right ? std::initializer_list<uint8_t>{0, 255, 0} : std::initializer_list<uint8_t>{255, 0, 0});
      else px.insert(px.end(), right ? std::initializer_list<uint8_t>{255, 255, 0} : std::initializer_list<uint8_t>{0, 0, 255});
    }
  return px;
}

// file must decode to exactly the [h, w, 3] pixels px.
inline ::testing::AssertionResult decodes_to(const std::vector<uint8_t>& file, const std::vector<uint8_t>& px, int w, int h) {
  const RgbImage img = decode_image(file);
  if (img.width != w || img.height != h)
    return ::testing::AssertionFailure() << "decoded " << img.width << "x" << img.height << ", expected " << w << "x" << h;
  if (img.rgb != px) return ::testing::AssertionFailure() << "pixels differ";
  return ::testing::AssertionSuccess();
}

// Decoding must throw g4::Error with every word in `words` in its message (nothing else may
// escape: no crash, no std::bad_alloc, no other exception type).
inline ::testing::AssertionResult refused_with(const std::vector<uint8_t>& bytes, const std::vector<std::string>& words,
                                               const DecodeLimits& limits = {}) {
  try {
    const RgbImage img = decode_image(bytes, limits);
    return ::testing::AssertionFailure() << "decoded a " << img.width << "x" << img.height << " image";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& w : words)
      if (msg.find(w) == std::string::npos) return ::testing::AssertionFailure() << "message lacks \"" << w << "\": " << msg;
    return ::testing::AssertionSuccess();
  }
}

}  // namespace g4::media::media_test
