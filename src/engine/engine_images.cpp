// Images in the engine: requests are checked against the model's image tokens and the tower at
// submit; prefill chunks keep an image whole where its tokens see each other; an image's soft
// tokens are computed by the vision tower and projector on the engine's kernels when its span is
// first scheduled, unless the encoder cache holds them (a prefix-cache hit that covers the span
// needs neither).
#include <chrono>
#include <string>

#include "engine/engine_sequence.h"
#include "model/vision_projector.h"
#include "model/vision_tower.h"
#include "platform/error.h"

namespace g4 {

namespace {

VisionInput input_of(const PromptImage& img) {
  return {img.pixel_values, img.positions, img.grid_rows, img.grid_cols};
}

}  // namespace

void Engine::check_images(const GenerationRequest& r) const {
  if (r.images.empty()) return;
  const ModelConfig& c = model_.config;
  if (!opts_.vision) throw Error("request: it holds images and the model has no vision tower");
  if (!c.image_token_id) throw Error("request: it holds images and the model's config.json has no image_token_id");
  const int64_t T = int64_t(r.prompt.size());
  int64_t prev_end = 0;
  for (size_t i = 0; i < r.images.size(); ++i) {
    const PromptImage& img = *r.images[i];
    const std::string name = "request: image " + std::to_string(i);
    check_vision_input(opts_.vision->config, input_of(img));  // throws naming the problem
    const int64_t S = vision_soft_tokens(opts_.vision->config, input_of(img));
    if (img.span.count != S)
      throw Error(name + " fills a span of " + std::to_string(img.span.count) + " tokens but has " + std::to_string(S) +
                  " soft tokens");
    if (img.span.first < prev_end || img.span.first + S > T)
      throw Error(name + ": span [" + std::to_string(img.span.first) + ", " + std::to_string(img.span.first + S) +
                  ") overlaps the previous image or leaves the prompt of " + std::to_string(T) + " tokens");
    for (int64_t p = img.span.first; p < img.span.first + S; ++p)
      if (r.prompt[size_t(p)] != *c.image_token_id)
        throw Error(name + ": prompt token " + std::to_string(r.prompt[size_t(p)]) + " at index " + std::to_string(p) +
                    " is not the image token " + std::to_string(*c.image_token_id));
    prev_end = img.span.first + S;
  }
}

// n prompt rows from s.fed, shortened to end before an image the chunk would cut, or grown to
// take a whole image that starts the chunk: under the "vision" rule an image's first rows attend
// to its last ones, so all must be in one step (this may exceed the step's token budget).
int64_t Engine::prefill_rows(const Sequence& s, int64_t n) const {
  if (!model_.config.vision_bidirectional()) return n;
  for (const auto& img : s.req.images) {
    const int64_t b = img->span.first, e = img->span.first + img->span.count;
    if (s.fed + n <= b || s.fed >= e) continue;  // not cut by [fed, fed + n)
    if (s.fed + n >= e && s.fed <= b) continue;  // wholly inside
    return s.fed < b ? b - s.fed : e - s.fed;
  }
  return n;
}

const SoftSpan* Engine::soft_span_at(Sequence& s, int64_t pos) {
  for (size_t i = 0; i < s.req.images.size(); ++i) {
    const PromptImage& img = *s.req.images[i];
    if (pos < img.span.first || pos >= img.span.first + img.span.count) continue;
    if (s.soft.empty()) s.soft.resize(s.req.images.size());  // sized once: spans keep their address
    Sequence::SoftImage& si = s.soft[i];
    if (!si.rows) {
      if (image_cache_) si.rows = image_cache_->find(img);
      if (si.rows) {
        ++s.image_cache_hits;
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        blocks::Exec ex;
        if (pool_) ex.matmul = &matmul_;
        si.rows = std::make_shared<const SoftRows>(encode_image(opts_.vision->config, opts_.vision->weights, input_of(img), ex));
        s.vision_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++s.images_encoded;
        if (image_cache_) image_cache_->insert(s.req.images[i], si.rows);
      }
      si.span = SoftSpan{si.rows->data(), img.span.first, img.span.count, /*vision=*/true};
    }
    return &si.span;
  }
  return nullptr;
}

}  // namespace g4
