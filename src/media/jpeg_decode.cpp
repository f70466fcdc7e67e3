#include "media/jpeg_decode.h"

// jpeglib.h needs size_t and FILE declared first.
#include <cstdio>
#include <cstddef>

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <string>
#include <vector>

#include "media/exif_orientation.h"
#include "platform/error.h"

namespace g4::media {

namespace {

// A progressive JPEG can hold thousands of tiny scans, each a full pass over the coefficients:
// a small file that takes minutes. libjpeg-turbo's own TurboJPEG API offers the same cap.
constexpr int kMaxScans = 500;

// libjpeg reports errors through error_exit and longjmp; the functions that call setjmp hold
// only pointers and trivially destructible locals.
struct JpegErrors {
  jpeg_error_mgr mgr;  // first member: libjpeg passes &mgr, we cast back
  jmp_buf jmp;
  bool truncated = false;
  char message[JMSG_LENGTH_MAX] = {};
  jpeg_progress_mgr progress;
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jmp, 1);
}

// Warnings about missing or damaged scan data become errors: libjpeg would return an image
// padded with grey. Other warnings (extra bytes between markers, odd JFIF versions) are
// harmless and ignored, as Pillow ignores them.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;  // trace messages
  const int code = cinfo->err->msg_code;
  if (code == JWRN_JPEG_EOF) reinterpret_cast<JpegErrors*>(cinfo->err)->truncated = true;
  if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_MUST_RESYNC ||
      code == JWRN_HUFF_BAD_CODE || code == JWRN_NOT_SEQUENTIAL || code == JWRN_BOGUS_PROGRESSION)
    jpeg_fail(cinfo);
}

void jpeg_count_scans(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(e->message, sizeof e->message, "more than %d progressive scans", kMaxScans);
    std::longjmp(e->jmp, 1);
  }
}

bool jpeg_create(jpeg_decompress_struct* cinfo, JpegErrors* e, std::span<const uint8_t> bytes) {
  if (setjmp(e->jmp)) return false;  // out of memory, or empty input
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  return true;
}

bool jpeg_read_header_and_markers(jpeg_decompress_struct* cinfo, JpegErrors* e) {
  if (setjmp(e->jmp)) return false;
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xffff);  // APP1: EXIF
  jpeg_read_header(cinfo, TRUE);
  return true;
}

bool jpeg_read_rgb(jpeg_decompress_struct* cinfo, JpegErrors* e, uint8_t* out) {
  if (setjmp(e->jmp)) return false;
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_components != 3) {
    std::snprintf(e->message, sizeof e->message, "%d output components instead of 3", cinfo->output_components);
    return false;
  }
  const size_t stride = size_t{cinfo->output_width} * 3;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + cinfo->output_scanline * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

[[noreturn]] void jpeg_refuse(const JpegErrors& e) {
  if (e.truncated) throw Error("JPEG image is truncated: the data ends before the image is complete");
  throw Error(std::string("JPEG image is corrupt: ") + e.message);
}

int jpeg_orientation(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    const std::span<const uint8_t> payload(m->data, m->data_length);
    if (payload.size() >= 6 && payload[0] == 'E' && payload[1] == 'x') return exif_orientation(payload);
  }
  return 1;
}

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  ~JpegHandle() { jpeg_destroy_decompress(&cinfo); }
};

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  JpegErrors e;
  JpegHandle h;
  h.cinfo.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = jpeg_fail;
  e.mgr.emit_message = jpeg_on_message;
  if (!jpeg_create(&h.cinfo, &e, bytes)) jpeg_refuse(e);
  e.progress.progress_monitor = jpeg_count_scans;
  h.cinfo.progress = &e.progress;

  if (!jpeg_read_header_and_markers(&h.cinfo, &e)) jpeg_refuse(e);
  check_declared_size("JPEG", h.cinfo.image_width, h.cinfo.image_height, limits);
  if (h.cinfo.jpeg_color_space == JCS_CMYK || h.cinfo.jpeg_color_space == JCS_YCCK)
    throw Error("JPEG image is CMYK, which is not supported (convert it to RGB)");

  RgbImage img;
  img.width = static_cast<int>(h.cinfo.image_width);
  img.height = static_cast<int>(h.cinfo.image_height);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);  // [height, width, 3]
  // Saved markers live in libjpeg's per-image pool, which jpeg_finish_decompress frees.
  const int orientation = jpeg_orientation(h.cinfo);
  if (!jpeg_read_rgb(&h.cinfo, &e, img.rgb.data())) jpeg_refuse(e);
  return orientation == 1 ? img : apply_exif_orientation(img, orientation);
}

}  // namespace g4::media
