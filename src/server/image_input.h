// A request's image parts -> the engine's PromptImages: bytes from the data: URL (or fetched from
// an allowed host), decoded and preprocessed for the served model's tower at the part's budget,
// and their placeholders in the prompt expanded to the soft-token spans. Every failure is a 400
// naming the part.
#pragma once
#include <memory>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/prompt_images.h"
#include "media/decode_limits.h"
#include "model/vision_config.h"
#include "server/api_error.h"
#include "server/media_fetch.h"
#include "server/openai_request.h"

namespace g4::server {

struct ImageOptions {
  MediaFetchOptions fetch;
  media::DecodeLimits decode;
  int default_budget = 0;  // soft tokens for a part without detail; 0: the tower's default (280)
};

// The budget a part gets: its detail's, else the request's g4.max_image_tokens, else the server's.
int image_budget(const ImagePart& part, const GenerationSpec& spec, const ImageOptions& o, const VisionConfig& vc);

// Image file bytes -> the tower's input at `budget` soft tokens (span not yet placed, key set).
// Throws g4::Error naming the format and the problem (truncated, corrupt, too many pixels).
std::shared_ptr<PromptImage> image_from_bytes(std::string_view bytes, int budget, const VisionConfig& vc,
                                              const media::DecodeLimits& limits = {});

// Decodes and preprocesses every image of `spec`, expands `prompt`'s placeholders (ids) and
// returns the images with their spans and prefix-cache keys.
std::variant<std::vector<std::shared_ptr<const PromptImage>>, ApiError> prepare_images(const GenerationSpec& spec,
                                                                                      std::vector<int>& prompt,
                                                                                      const ImageTokenIds& ids,
                                                                                      const VisionConfig& vc,
                                                                                      const ImageOptions& o);

}  // namespace g4::server
