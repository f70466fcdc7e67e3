// Which image format a byte string holds, told by its magic bytes (never by a file name or a
// declared MIME type: a client's label is not evidence, the first bytes are).
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace g4::media {

enum class ImageFormat { Png, Jpeg, WebP, Gif, Bmp, Tiff, Heif, Avif, Unknown };

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// "PNG", "JPEG", ...; "unknown" for Unknown.
const char* image_format_name(ImageFormat f);

// The first bytes as hex ("89 50 4e 47"), for a message about an unrecognised file.
std::string leading_bytes_hex(std::span<const uint8_t> bytes, size_t n = 8);

}  // namespace g4::media
