// ImageEncoderCache on its own: full-input comparison behind the key, LRU eviction by bytes, and
// rows that outlive their entry while a holder keeps them.
#include <gtest/gtest.h>

#include "engine/image_cache.h"

namespace g4 {
namespace image_cache_test {

// A 2-patch image whose pixels are all `v` (8 floats per patch), keyed by content.
std::shared_ptr<PromptImage> image(float v) {
  auto img = std::make_shared<PromptImage>();
  img->pixel_values.assign(16, v);
  img->positions = {0, 0, 1, 0};
  img->grid_rows = 1;
  img->grid_cols = 2;
  img->key = image_content_key(*img);
  return img;
}

std::shared_ptr<const SoftRows> rows(float v) { return std::make_shared<const SoftRows>(SoftRows(8, v)); }

constexpr uint64_t kEntry = (16 + 8) * 4 + 4 * 4;  // pixels + rows + positions, in bytes

TEST(ImageEncoderCache, FindsOnlyAnEqualInput) {
  ImageEncoderCache c(1 << 20);
  c.insert(image(0.5f), rows(1));
  EXPECT_EQ(c.bytes(), kEntry);
  ASSERT_TRUE(c.find(*image(0.5f)));
  EXPECT_EQ((*c.find(*image(0.5f)))[0], 1);
  EXPECT_FALSE(c.find(*image(0.25f)));
  auto forged = image(0.25f);
  forged->key = image(0.5f)->key;  // a collision: same key, other pixels
  EXPECT_FALSE(c.find(*forged));
  auto moved = image(0.5f);
  moved->positions = {1, 0, 0, 0};  // same pixels and key field, other positions
  EXPECT_FALSE(c.find(*moved));
  // Both share the key now, each finds its own rows.
  c.insert(forged, rows(2));
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ((*c.find(*forged))[0], 2);
  EXPECT_EQ((*c.find(*image(0.5f)))[0], 1);
  c.insert(image(0.5f), rows(3));  // already held: kept as it was
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ((*c.find(*image(0.5f)))[0], 1);
}

TEST(ImageEncoderCache, EvictsTheLeastRecentPastItsBytes) {
  ImageEncoderCache c(2 * kEntry);
  c.insert(image(1), rows(1));
  c.insert(image(2), rows(2));
  const auto held = c.find(*image(1));  // image(1) becomes the most recent
  c.insert(image(3), rows(3));          // image(2) goes
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.bytes(), 2 * kEntry);
  EXPECT_TRUE(c.find(*image(1)));
  EXPECT_FALSE(c.find(*image(2)));
  EXPECT_TRUE(c.find(*image(3)));
  c.insert(image(4), rows(4));  // image(1) goes; a sequence still holding its rows keeps them
  EXPECT_FALSE(c.find(*image(1)));
  EXPECT_EQ((*held)[0], 1);
  ImageEncoderCache tiny(kEntry - 1);  // an entry larger than the budget is not kept
  tiny.insert(image(1), rows(1));
  EXPECT_EQ(tiny.entries(), 0u);
  EXPECT_EQ(tiny.bytes(), 0u);
}

}  // namespace image_cache_test
}  // namespace g4
