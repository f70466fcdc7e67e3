// Transparent pixels composited on white, as transformers' convert_to_rgb does (it pastes the
// RGBA image over an opaque white RGBA canvas with Pillow's Image.alpha_composite, then drops
// alpha). The arithmetic is Pillow's integer version, so results match it to the level.
#pragma once
#include <cstdint>

#include "media/rgb_image.h"

namespace g4::media {

// One channel value c with alpha a over white.
uint8_t composite_on_white(uint8_t c, uint8_t a);

// rgba [height, width, 4] -> RgbImage [height, width, 3] over white.
RgbImage rgba_over_white(const uint8_t* rgba, int width, int height);

}  // namespace g4::media
