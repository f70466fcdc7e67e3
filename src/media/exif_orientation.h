// EXIF orientation: cameras store the sensor's pixels and record in tag 0x0112 how to turn them
// upright. transformers' load_image applies it (PIL.ImageOps.exif_transpose), so g4 does too.
#pragma once
#include <cstdint>
#include <span>

#include "media/rgb_image.h"

namespace g4::media {

// Orientation 1..8 from an APP1 payload ("Exif\0\0" + a TIFF header and IFD0); 1 (upright) when
// the payload is not EXIF, has no orientation tag, or is malformed (a bad tag never refuses an
// image: Pillow ignores it too).
int exif_orientation(std::span<const uint8_t> app1);

// The image turned upright for orientation 1..8 (values outside that range leave it as is):
// 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate
// 90 counter-clockwise. 5..8 swap width and height.
RgbImage apply_exif_orientation(const RgbImage& in, int orientation);

}  // namespace g4::media
