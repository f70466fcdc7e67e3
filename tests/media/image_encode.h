// Test-only encoders: small PNG, JPEG (optionally with an EXIF APP1 segment) and WebP files made
// in memory with the same Debian libraries the decoders use, so tests build their inputs
// instead of committing binaries. Failures abort the test (ADD_FAILURE + empty result).
#pragma once
// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace g4::media::media_test {

using Bytes = std::vector<uint8_t>;

// Optional PNG chunks: PLTE entries (RGB triples), tRNS (palette alphas, or a grey/RGB key as
// png_color_16), and the sample depth.
struct PngExtras {
  std::vector<png_color> palette;
  std::vector<png_byte> palette_alpha;
  bool has_key = false;
  png_color_16 key{};
  int bit_depth = 8;
};

// pixels: [h, w, channels] rows as libpng takes them (16-bit samples big-endian); color_type any
// PNG_COLOR_TYPE_*.
inline Bytes encode_png(const std::vector<uint8_t>& pixels, int w, int h, int color_type, const PngExtras& x = {}) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return {};
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep d, size_t n) {
        auto* o = static_cast<Bytes*>(png_get_io_ptr(p));
        o->insert(o->end(), d, d + n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, x.bit_depth, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!x.palette.empty()) png_set_PLTE(png, info, x.palette.data(), static_cast<int>(x.palette.size()));
  if (!x.palette_alpha.empty())
    png_set_tRNS(png, info, x.palette_alpha.data(), static_cast<int>(x.palette_alpha.size()), nullptr);
  if (x.has_key) png_set_tRNS(png, info, nullptr, 0, &x.key);
  png_write_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, pixels.data() + y * row_bytes);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// rgb: [h, w, components] (3: RGB, 1: greyscale). app1: raw APP1 payload (e.g. "Exif\0\0" +
// TIFF), written after SOI/JFIF.
inline Bytes encode_jpeg(const std::vector<uint8_t>& rgb, int w, int h, int quality = 95,
                         const Bytes& app1 = {}, int components = 3) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  if (!app1.empty()) jpeg_write_marker(&c, JPEG_APP0 + 1, app1.data(), static_cast<unsigned>(app1.size()));
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + static_cast<size_t>(c.next_scanline) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  std::free(buf);
  return out;
}

// pixels: [h, w, 4] RGBA when alpha, else [h, w, 3]; lossless so decoded pixels compare exactly.
inline Bytes encode_webp_lossless(const std::vector<uint8_t>& pixels, int w, int h, bool alpha) {
  uint8_t* buf = nullptr;
  const size_t n = alpha ? WebPEncodeLosslessRGBA(pixels.data(), w, h, w * 4, &buf)
                         : WebPEncodeLosslessRGB(pixels.data(), w, h, w * 3, &buf);
  Bytes out(buf, buf + n);
  WebPFree(buf);
  return out;
}

// An EXIF APP1 payload holding only IFD0 with an Orientation (0x0112) SHORT tag.
inline Bytes exif_with_orientation(int orientation, bool big_endian = false) {
  Bytes b = {'E', 'x', 'i', 'f', 0, 0};
  auto u16 = [&](unsigned v) {
    if (big_endian) b.insert(b.end(), {uint8_t(v >> 8), uint8_t(v)});
    else b.insert(b.end(), {uint8_t(v), uint8_t(v >> 8)});
  };
  auto u32 = [&](unsigned v) {
    if (big_endian) { u16(v >> 16); u16(v & 0xffff); }
    else { u16(v & 0xffff); u16(v >> 16); }
  };
  b.insert(b.end(), big_endian ? std::initializer_list<uint8_t>{'M', 'M'} : std::initializer_list<uint8_t>{'I', 'I'});
  u16(42);
  u32(8);  // IFD0 right after the header
  u16(1);  // one entry
  u16(0x0112);
  u16(3);  // SHORT
  u32(1);  // count
  u16(orientation);
  u16(0);  // value field padding
  u32(0);  // no next IFD
  return b;
}

}  // namespace g4::media::media_test
