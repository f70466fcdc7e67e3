#include "media/image_decode.h"

#include <string>

#include "media/image_format.h"
#include "media/jpeg_decode.h"
#include "media/png_decode.h"
#include "media/webp_decode.h"
#include "platform/error.h"

namespace g4::media {

RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  const ImageFormat f = sniff_image_format(bytes);
  switch (f) {
    case ImageFormat::Png: return decode_png(bytes, limits);
    case ImageFormat::Jpeg: return decode_jpeg(bytes, limits);
    case ImageFormat::WebP: return decode_webp(bytes, limits);
    case ImageFormat::Unknown:
      if (bytes.empty()) throw Error("image data is empty");
      throw Error("image data is not a recognised format (first bytes " + leading_bytes_hex(bytes) +
                  "); supported: PNG, JPEG, WebP");
    default:
      throw Error(std::string(image_format_name(f)) + " images are not supported; send PNG, JPEG or WebP");
  }
}

}  // namespace g4::media
