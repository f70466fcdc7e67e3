// Bytes -> RgbImage for every supported format (PNG, JPEG, WebP), picked by magic bytes. The
// one entry point the layers above call with client data.
#pragma once
#include <cstdint>
#include <span>

#include "media/decode_limits.h"
#include "media/rgb_image.h"

namespace g4::media {

// Throws g4::Error with a message naming the format and the problem: unrecognised or
// unsupported format (GIF, BMP, TIFF, HEIF, AVIF are named), truncated or corrupt data, a
// declared size over limits.max_pixels (checked before decoding). Never returns an empty image.
RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

}  // namespace g4::media
