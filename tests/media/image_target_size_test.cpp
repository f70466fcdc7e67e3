// Target sizes and soft-token counts from the budget, against the spec's worked examples
// (docs gemma4-vision.md §2.2) and the fixtures' tiny geometry; budgets outside the set refused.
#include "media/image_target_size.h"

#include <gtest/gtest.h>

#include <string>

#include "media/image_token_budget.h"
#include "platform/error.h"

namespace g4::media {
namespace image_target_size_test {

struct Case {
  int h0, w0, budget, h, w, tokens;
};

TEST(ImageTargetSize, SpecWorkedExamplesAtReleasedGeometry) {
  const Case cases[] = {
      {768, 1024, 280, 672, 912, 266}, {1080, 1920, 280, 576, 1056, 264},
      {4000, 3000, 280, 912, 672, 266}, {100, 1000, 280, 240, 2496, 260},
      {16, 2000, 280, 48, 8976, 187},  {224, 224, 280, 768, 768, 256},  // small images scale up
      {4, 600, 140, 48, 6720, 140},  // the th == 0 branch, capped at budget x 48
  };
  for (const Case& c : cases) {
    const ImageSize s = image_target_size(c.h0, c.w0, c.budget);
    EXPECT_EQ(s, (ImageSize{c.h, c.w})) << c.h0 << "x" << c.w0 << " -> " << s.height << "x" << s.width;
    EXPECT_EQ(image_soft_tokens(s), c.tokens) << c.h0 << "x" << c.w0;
    EXPECT_EQ(s.height % 48, 0);
    EXPECT_EQ(s.width % 48, 0);
  }
}

TEST(ImageTargetSize, TinyGeometryStripHitsTheSideCap) {
  // The spec's "4x600 at budget 140 -> 12x1680" example is for patch 4 (side 12).
  EXPECT_EQ(image_target_size(4, 600, 140, {4, 3}), (ImageSize{12, 1680}));
  EXPECT_EQ(image_target_size(600, 4, 140, {4, 3}), (ImageSize{1680, 12}));
}

TEST(ImageTargetSize, NeverExceedsTheBudgetAndKeepsTheAspectRatio) {
  for (int budget : kImageTokenBudgets) {
    for (int h0 : {1, 7, 48, 333, 1000, 4096}) {
      for (int w0 : {1, 9, 64, 500, 2048}) {
        const ImageSize s = image_target_size(h0, w0, budget);
        EXPECT_LE(image_soft_tokens(s), budget) << h0 << "x" << w0 << " @" << budget;
        EXPECT_GT(image_soft_tokens(s), 0);
        if (s.height > 48 && s.width > 48) {  // unless a side hit its floor of one block
          const double ratio = double(s.width) / s.height, ratio0 = double(w0) / h0;
          EXPECT_NEAR(ratio / ratio0, 1.0, 48.0 / std::min(s.height, s.width) + 1e-9) << h0 << "x" << w0;
        }
      }
    }
  }
}

TEST(ImageTargetSize, BudgetOutsideTheAllowedSetIsRefused) {
  for (int bad : {0, -1, 69, 100, 281, 2240}) {
    try {
      image_target_size(100, 100, bad);
      ADD_FAILURE() << "budget " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("budget " + std::to_string(bad) + " is not one of 70, 140, 280, 560, 1120"),
                std::string::npos)
          << e.what();
    }
  }
  for (int good : kImageTokenBudgets) EXPECT_NO_THROW(check_image_token_budget(good));
}

TEST(ImageTargetSize, EmptySourceIsRefused) {
  EXPECT_THROW(image_target_size(0, 10, 280), Error);
  EXPECT_THROW(image_target_size(10, -3, 280), Error);
}

}  // namespace image_target_size_test
}  // namespace g4::media
