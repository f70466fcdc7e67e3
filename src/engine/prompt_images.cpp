#include "engine/prompt_images.h"

#include <algorithm>
#include <string>

#include "platform/error.h"
#include "platform/siphash.h"

namespace g4 {

std::vector<PromptImageSpan> expand_image_placeholders(std::vector<int>& prompt, const ImageTokenIds& ids,
                                                       const std::vector<int>& soft_counts) {
  const auto placeholders = size_t(std::count(prompt.begin(), prompt.end(), ids.image));
  if (placeholders != soft_counts.size())
    throw Error("the prompt holds " + std::to_string(placeholders) + " image placeholder token(s) (id " +
                std::to_string(ids.image) + ") but " + std::to_string(soft_counts.size()) +
                " image(s) were given (is the placeholder text typed into a message?)");
  std::vector<int> out;
  std::vector<PromptImageSpan> spans;
  int64_t total = 0;
  for (int c : soft_counts) total += c + 2;
  out.reserve(prompt.size() + size_t(total));
  size_t next = 0;
  for (int t : prompt) {
    if (t != ids.image) {
      out.push_back(t);
      continue;
    }
    const int s = soft_counts[next++];
    if (s < 1) throw Error("image " + std::to_string(next - 1) + " has " + std::to_string(s) + " soft tokens");
    out.push_back(ids.begin);
    spans.push_back({int64_t(out.size()), s});
    out.insert(out.end(), size_t(s), ids.image);
    out.push_back(ids.end);
  }
  prompt = std::move(out);
  return spans;
}

ImageTokenIds resolve_image_token_ids(const ModelConfig& c, const text::Vocabulary* vocab, std::string& missing) {
  const auto id = [&](const std::optional<int>& from_config, const char* piece) {
    const int v = from_config ? *from_config : vocab ? vocab->find(piece) : -1;
    if ((v < 0 || v >= c.vocab_size) && missing.empty()) missing = piece;
    return v;
  };
  missing.clear();
  return {id(c.image_token_id, "<|image|>"), id(c.boi_token_id, "<|image>"), id(c.eoi_token_id, "<image|>")};
}

uint64_t image_content_key(const PromptImage& img) {
  SipHasher h(process_sip_key());
  h.update(&img.grid_rows, sizeof img.grid_rows);
  h.update(&img.grid_cols, sizeof img.grid_cols);
  h.update(img.positions.data(), img.positions.size() * sizeof(int32_t));
  h.update(img.pixel_values.data(), img.pixel_values.size() * sizeof(float));
  return h.final();
}

std::vector<int> prefix_keys(const std::vector<int>& prompt, const std::vector<std::shared_ptr<const PromptImage>>& images) {
  std::vector<int> keys = prompt;
  for (const auto& img : images)
    for (int64_t i = 0; i < img->span.count; ++i) {
      // A 31-bit draw per position; a span matches only if every one of its positions does.
      uint64_t x = img->key + 0x9E3779B97F4A7C15ull * uint64_t(i + 1);
      x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
      keys[size_t(img->span.first + i)] = -1 - int(uint32_t(x ^ (x >> 29)) & 0x7FFFFFFF);
    }
  return keys;
}

std::vector<PromptImageSpan> find_image_spans(const std::vector<int>& prompt, const ImageTokenIds& ids) {
  std::vector<PromptImageSpan> spans;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != ids.image) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prompt.size() && prompt[j] == ids.image) ++j;
    if (i == 0 || prompt[i - 1] != ids.begin || j == prompt.size() || prompt[j] != ids.end)
      throw Error("image tokens at " + std::to_string(i) + ".." + std::to_string(j - 1) + " are not between <|image> (id " +
                  std::to_string(ids.begin) + ") and <image|> (id " + std::to_string(ids.end) + ")");
    spans.push_back({int64_t(i), int64_t(j - i)});
    i = j;
  }
  return spans;
}

}  // namespace g4
