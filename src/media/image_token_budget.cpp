#include "media/image_token_budget.h"

#include <algorithm>
#include <string>

#include "platform/error.h"

namespace g4::media {

void check_image_token_budget(int budget) {
  if (std::find(kImageTokenBudgets.begin(), kImageTokenBudgets.end(), budget) != kImageTokenBudgets.end()) return;
  std::string allowed;
  for (int b : kImageTokenBudgets) allowed += (allowed.empty() ? "" : ", ") + std::to_string(b);
  throw Error("image token budget " + std::to_string(budget) + " is not one of " + allowed);
}

}  // namespace g4::media
