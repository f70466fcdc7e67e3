// WebP (lossy, lossless, with or without alpha) -> RgbImage with libwebp; alpha composited on
// white. Animated WebP is refused (only still images are taken).
#pragma once
#include <cstdint>
#include <span>

#include "media/decode_limits.h"
#include "media/rgb_image.h"

namespace g4::media {

// Throws g4::Error ("WebP image is truncated: ...", "WebP image is corrupt: ...", the size
// limit) on bad input; the limit is checked from the bitstream header before decoding.
RgbImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

}  // namespace g4::media
