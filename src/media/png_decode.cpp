#include "media/png_decode.h"

#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "media/alpha_composite.h"
#include "platform/error.h"

namespace g4::media {

namespace {

// State shared with libpng's callbacks. libpng reports errors by longjmp: the functions that
// call setjmp below hold only pointers and trivially destructible locals, so nothing is skipped.
struct PngSource {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  bool truncated = false;
  char message[256] = {};
};

void png_read_from_memory(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) {
    src->truncated = true;
    png_error(png, "the data ends early");
  }
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary-chunk trouble: Pillow reads on

struct PngHeader {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  bool has_trns = false;
};

bool png_read_header(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  h->width = png_get_image_width(png, info);
  h->height = png_get_image_height(png, info);
  h->bit_depth = png_get_bit_depth(png, info);
  h->color_type = png_get_color_type(png, info);
  h->has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  return true;
}

// Sets the transforms that turn any PNG into 8-bit RGB or RGBA; returns the channel count
// (3 or 4), 0 on a libpng error.
int png_set_rgb_transforms(png_structp png, png_infop info, const PngHeader& h) {
  if (setjmp(png_jmpbuf(png))) return 0;
  if (h.bit_depth == 16) png_set_strip_16(png);
  if (h.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (h.color_type == PNG_COLOR_TYPE_GRAY && h.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (h.has_trns && h.color_type != PNG_COLOR_TYPE_RGB) png_set_tRNS_to_alpha(png);
  if (!(h.color_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return png_get_channels(png, info);
}

bool png_read_pixels(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);  // reads to IEND, so a file cut after its pixels is refused too
  return true;
}

[[noreturn]] void png_refuse(const PngSource& src) {
  if (src.truncated)
    throw Error("PNG image is truncated: the data ends at byte " + std::to_string(src.size) +
                " before the image is complete");
  throw Error(std::string("PNG image is corrupt: ") + src.message);
}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  // IHDR is the first chunk of every PNG (libpng refuses anything else); its size is checked
  // here because png_read_info reads on to the first IDAT, allocating for what comes before.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return uint32_t{bytes[at]} << 24 | uint32_t{bytes[at + 1]} << 16 | uint32_t{bytes[at + 2]} << 8 | bytes[at + 3];
    };
    check_declared_size("PNG", be32(16), be32(20), limits);
  }
  PngSource src;
  src.data = bytes.data();
  src.size = bytes.size();
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
  if (h.png) h.info = png_create_info_struct(h.png);
  if (!h.png || !h.info) throw Error("PNG decoder could not be initialised (out of memory)");
  png_set_read_fn(h.png, &src, png_read_from_memory);

  PngHeader hdr;
  if (!png_read_header(h.png, h.info, &hdr)) png_refuse(src);
  check_declared_size("PNG", hdr.width, hdr.height, limits);
  const int channels = png_set_rgb_transforms(h.png, h.info, hdr);
  if (channels != 3 && channels != 4) png_refuse(src);

  // [height, width, channels]
  std::vector<uint8_t> pixels(static_cast<size_t>(hdr.width) * hdr.height * channels);
  std::vector<png_bytep> rows(hdr.height);
  for (png_uint_32 y = 0; y < hdr.height; ++y) rows[y] = pixels.data() + static_cast<size_t>(y) * hdr.width * channels;
  if (!png_read_pixels(h.png, rows.data())) png_refuse(src);

  const int w = static_cast<int>(hdr.width), ht = static_cast<int>(hdr.height);
  if (channels == 4) return rgba_over_white(pixels.data(), w, ht);
  return RgbImage{w, ht, std::move(pixels)};
}

}  // namespace g4::media
