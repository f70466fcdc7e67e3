#include "media/decode_limits.h"

#include <string>

#include "platform/error.h"

namespace g4::media {

void check_declared_size(const char* format, uint64_t width, uint64_t height, const DecodeLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width == 0 || height == 0) throw Error(std::string(format) + " image declares an empty size " + size);
  // Both sides fit in 32 bits in every supported format, so the product cannot overflow.
  if (width * height > limits.max_pixels)
    throw Error(std::string(format) + " image declares " + size + " = " + std::to_string(width * height) +
                " pixels, over the limit of " + std::to_string(limits.max_pixels) + " pixels");
}

}  // namespace g4::media
