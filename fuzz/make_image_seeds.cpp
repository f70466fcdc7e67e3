// Writes the image_decode seed corpus (fuzz/corpus/image_decode/): 8x8 images of every decoder
// path (RGB, RGBA, grey PNG; baseline JPEG with and without an EXIF orientation; lossless RGB
// and RGBA and lossy WebP), each under 1 KB, made with the test encoders. From the repo root:
//   g++ -std=c++20 -Itests/media fuzz/make_image_seeds.cpp -o /tmp/make_image_seeds -lpng -ljpeg -lwebp
//   /tmp/make_image_seeds fuzz/corpus/image_decode
// The corpus also holds img2_small_30x40.png, copied from the shared vision fixtures.
#include <fstream>
#include <string>

#include "image_encode.h"

using namespace g4::media::media_test;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  auto put = [&](const char* name, const Bytes& b) {
    std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  };
  std::vector<uint8_t> rgb, rgba, grey;  // [8, 8, C]: gradients, so the coders have work to do
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) {
      const uint8_t r = x * 32, g = y * 32, b = (x ^ y) * 32;
      rgb.insert(rgb.end(), {r, g, b});
      rgba.insert(rgba.end(), {r, g, b, uint8_t(x * 36)});
      grey.push_back(r);
    }
  put("rgb_8x8.png", encode_png(rgb, 8, 8, PNG_COLOR_TYPE_RGB));
  put("rgba_8x8.png", encode_png(rgba, 8, 8, PNG_COLOR_TYPE_RGB_ALPHA));
  put("grey_8x8.png", encode_png(grey, 8, 8, PNG_COLOR_TYPE_GRAY));
  put("rgb_8x8.jpg", encode_jpeg(rgb, 8, 8, 50));
  put("rgb_8x8_exif6.jpg", encode_jpeg(rgb, 8, 8, 50, exif_with_orientation(6)));
  put("rgb_8x8_lossless.webp", encode_webp_lossless(rgb, 8, 8, false));
  put("rgba_8x8_lossless.webp", encode_webp_lossless(rgba, 8, 8, true));
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeRGB(rgb.data(), 8, 8, 8 * 3, 50, &buf);
  put("rgb_8x8_lossy.webp", Bytes(buf, buf + n));
  WebPFree(buf);
  return 0;
}
