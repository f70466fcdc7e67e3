#include "media/webp_decode.h"

#include <webp/decode.h>

#include <string>
#include <vector>

#include "media/alpha_composite.h"
#include "platform/error.h"

namespace g4::media {

namespace {

[[noreturn]] void webp_refuse(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_NOT_ENOUGH_DATA:
      throw Error("WebP image is truncated: the data ends before the image is complete");
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      throw Error("WebP image uses a feature libwebp does not support");
    case VP8_STATUS_OUT_OF_MEMORY:
      throw Error("WebP image could not be decoded: out of memory");
    default:
      throw Error("WebP image is corrupt: invalid " +
                  std::string(status == VP8_STATUS_INVALID_PARAM ? "parameters" : "bitstream"));
  }
}

}  // namespace

RgbImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw Error("WebP decoder could not be initialised (library version mismatch)");
  const VP8StatusCode head = WebPGetFeatures(bytes.data(), bytes.size(), &config.input);
  if (head != VP8_STATUS_OK) webp_refuse(head);
  if (config.input.has_animation) throw Error("WebP image is animated, which is not supported (send a still image)");
  check_declared_size("WebP", config.input.width, config.input.height, limits);

  const int w = config.input.width, h = config.input.height;
  const int channels = config.input.has_alpha ? 4 : 3;
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * channels);  // [h, w, channels]
  config.output.colorspace = channels == 4 ? MODE_RGBA : MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = pixels.data();
  config.output.u.RGBA.stride = w * channels;
  config.output.u.RGBA.size = pixels.size();
  const VP8StatusCode status = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);  // external memory: frees nothing of ours
  if (status != VP8_STATUS_OK) webp_refuse(status);
  if (channels == 4) return rgba_over_white(pixels.data(), w, h);
  return RgbImage{w, h, std::move(pixels)};
}

}  // namespace g4::media
