#include "server/image_input.h"

#include <span>

#include "media/image_decode.h"
#include "media/image_processor.h"
#include "platform/error.h"
#include "server/image_parts.h"

namespace g4::server {

int image_budget(const ImagePart& part, const GenerationSpec& spec, const ImageOptions& o, const VisionConfig& vc) {
  if (part.budget > 0) return part.budget;
  if (spec.max_image_tokens > 0) return spec.max_image_tokens;
  if (o.default_budget > 0) return o.default_budget;
  return vc.default_image_budget();
}

std::shared_ptr<PromptImage> image_from_bytes(std::string_view bytes, int budget, const VisionConfig& vc,
                                              const media::DecodeLimits& limits) {
  const media::RgbImage rgb =
      media::decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), limits);
  media::ProcessedImage p = media::preprocess_image(rgb, budget, {vc.patch_size, vc.pooling_kernel_size});
  auto img = std::make_shared<PromptImage>();
  img->pixel_values = std::move(p.patches.pixel_values);
  img->positions = std::move(p.patches.positions);
  img->grid_rows = p.patches.patches_y;
  img->grid_cols = p.patches.patches_x;
  img->span.count = p.soft_tokens;
  img->key = image_content_key(*img);
  return img;
}

namespace {

std::variant<std::string, ApiError> image_bytes(const ImagePart& part, const ImageOptions& o) {
  if (part.url.rfind("data:", 0) == 0) {
    auto d = parse_data_url(part.url, part.where);
    if (auto* e = std::get_if<ApiError>(&d)) return *e;
    return std::move(std::get<DataUrl>(d).bytes);
  }
  return fetch_media(part.url, o.fetch, part.where);
}

}  // namespace

std::variant<std::vector<std::shared_ptr<const PromptImage>>, ApiError> prepare_images(const GenerationSpec& spec,
                                                                                      std::vector<int>& prompt,
                                                                                      const ImageTokenIds& ids,
                                                                                      const VisionConfig& vc,
                                                                                      const ImageOptions& o) {
  std::vector<std::shared_ptr<PromptImage>> images;
  std::vector<int> counts;
  for (const ImagePart& part : spec.images) {
    auto bytes = image_bytes(part, o);
    if (auto* e = std::get_if<ApiError>(&bytes)) return *e;
    const std::string& b = std::get<std::string>(bytes);
    const int budget = image_budget(part, spec, o, vc);
    std::shared_ptr<PromptImage> img;
    try {
      img = image_from_bytes(b, budget, vc, o.decode);
    } catch (const Error& e) {
      return bad_request("'" + part.where + "': " + e.what(), part.where, "invalid_image");
    }
    counts.push_back(int(img->span.count));
    images.push_back(std::move(img));
  }
  std::vector<PromptImageSpan> spans;
  try {
    spans = expand_image_placeholders(prompt, ids, counts);
  } catch (const Error& e) {
    return bad_request(e.what(), "messages", "invalid_prompt");
  }
  std::vector<std::shared_ptr<const PromptImage>> out;
  for (size_t i = 0; i < images.size(); ++i) {
    images[i]->span = spans[i];
    out.push_back(std::move(images[i]));
  }
  return out;
}

}  // namespace g4::server
