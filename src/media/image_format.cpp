#include "media/image_format.h"

#include <cstdio>
#include <cstring>

namespace g4::media {

namespace {

bool starts_with(std::span<const uint8_t> b, size_t at, const char* magic, size_t n) {
  return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  if (starts_with(b, 0, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::Png;
  if (starts_with(b, 0, "\xff\xd8\xff", 3)) return ImageFormat::Jpeg;
  if (starts_with(b, 0, "RIFF", 4) && starts_with(b, 8, "WEBP", 4)) return ImageFormat::WebP;
  if (starts_with(b, 0, "GIF87a", 6) || starts_with(b, 0, "GIF89a", 6)) return ImageFormat::Gif;
  if (starts_with(b, 0, "BM", 2)) return ImageFormat::Bmp;
  if (starts_with(b, 0, "II*\0", 4) || starts_with(b, 0, "MM\0*", 4)) return ImageFormat::Tiff;
  // ISO base media files: a box size, then "ftyp" and the major brand.
  if (starts_with(b, 4, "ftypavi", 7)) return ImageFormat::Avif;
  if (starts_with(b, 4, "ftyphei", 7) || starts_with(b, 4, "ftypmif1", 8) ||
      starts_with(b, 4, "ftyphev", 7))
    return ImageFormat::Heif;
  return ImageFormat::Unknown;
}

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Png: return "PNG";
    case ImageFormat::Jpeg: return "JPEG";
    case ImageFormat::WebP: return "WebP";
    case ImageFormat::Gif: return "GIF";
    case ImageFormat::Bmp: return "BMP";
    case ImageFormat::Tiff: return "TIFF";
    case ImageFormat::Heif: return "HEIF";
    case ImageFormat::Avif: return "AVIF";
    case ImageFormat::Unknown: break;
  }
  return "unknown";
}

std::string leading_bytes_hex(std::span<const uint8_t> bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < n; ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", bytes[i]);
    out += buf;
  }
  return out.empty() ? "(empty)" : out;
}

}  // namespace g4::media
