// Limits a decoder checks from the file's header, before it allocates pixel memory: a few
// hundred bytes of PNG or WebP can declare a gigapixel image (a decompression bomb).
#pragma once
#include <cstdint>

namespace g4::media {

struct DecodeLimits {
  // Pillow's default Image.MAX_IMAGE_PIXELS (about 89.5 M, a 9459 x 9459 square), so g4 takes
  // what transformers' image loading takes. Decoding needs up to 4 bytes a pixel (RGBA) plus the
  // 3-byte result: about 630 MiB at the limit.
  uint64_t max_pixels = 89'478'485;
};

// Throws g4::Error naming the format, the declared size and the limit when width x height
// exceeds the limit, or when a side is zero.
void check_declared_size(const char* format, uint64_t width, uint64_t height, const DecodeLimits& limits);

}  // namespace g4::media
