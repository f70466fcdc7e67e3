// The soft-token budget of one image (transformers' max_soft_tokens): how many tokens the image
// may become in the prompt. Gemma 4 accepts only these five; 280 is the released default.
#pragma once
#include <array>

namespace g4::media {

inline constexpr std::array<int, 5> kImageTokenBudgets = {70, 140, 280, 560, 1120};
inline constexpr int kDefaultImageTokenBudget = 280;

// Throws g4::Error naming the value and the allowed set unless budget is one of them.
void check_image_token_budget(int budget);

}  // namespace g4::media
