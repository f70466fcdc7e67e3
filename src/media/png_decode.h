// PNG -> RgbImage with libpng. Pixel handling follows what Pillow + transformers' convert_to_rgb
// make of each PNG type, so the processor sees the pixels the reference sees:
//   16-bit samples keep their high byte; grey is replicated to RGB; palette entries are looked
//   up; alpha (RGBA, grey+alpha, a palette's tRNS, a grey tRNS key) is composited on white; an
//   RGB image's tRNS colour key is ignored (Pillow keeps such an image in mode RGB, which
//   convert_to_rgb returns untouched); gamma and colour profiles are not applied.
#pragma once
#include <cstdint>
#include <span>

#include "media/decode_limits.h"
#include "media/rgb_image.h"

namespace g4::media {

// Throws g4::Error ("PNG image is truncated: ...", "PNG image is corrupt: ...", or the size
// limit) on bad input; the size limit is checked from IHDR before any pixel memory exists.
RgbImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);

}  // namespace g4::media
