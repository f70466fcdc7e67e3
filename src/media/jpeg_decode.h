// JPEG -> RgbImage with libjpeg(-turbo), upright by the EXIF orientation (exif_orientation.h).
// Greyscale is replicated to RGB. CMYK/YCCK JPEGs are refused (rare; Pillow's inverted-Adobe
// conversion is not reproduced). A file cut short or with corrupt entropy-coded data is
// refused, although libjpeg would fill the missing part with grey and call it a warning.
#pragma once
#include <cstdint>
#include <span>

#include "media/decode_limits.h"
#include "media/rgb_image.h"

namespace g4::media {

// Throws g4::Error ("JPEG image is truncated: ...", "JPEG image is corrupt: ...", the size
// limit) on bad input; the limit is checked from the frame header before decoding.
RgbImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);

}  // namespace g4::media
