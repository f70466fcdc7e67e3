// Images in a prompt: the chat template writes one <|image|> per image part; the processor
// expands each into <|image> + <|image|> x S + <image|>, S being that image's soft-token count
// (transformers' Gemma4Processor.replace_image_token; no newlines around it). The spans record
// where each image's soft tokens sit, so the forward pass can put its rows there.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "text/vocab.h"

namespace g4 {

struct ImageTokenIds {
  int image = -1;  // <|image|>: the placeholder, and each soft token's position
  int begin = -1;  // <|image>
  int end = -1;    // <image|>
};

struct PromptImageSpan {
  int64_t first = 0;  // prompt index of the image's first soft token
  int64_t count = 0;  // its soft tokens
};

// One image of a request: the vision tower's input (owned; media::ImagePatches' fields) and the
// span of the prompt its soft tokens fill. The engine runs the tower when the span is first
// prefilled (not at all when the prefix cache already holds it).
struct PromptImage {
  std::vector<float> pixel_values;  // [N, p*p*3], values in [0, 1]
  std::vector<int32_t> positions;   // [N, 2]: (patch column, patch row)
  int grid_rows = 0, grid_cols = 0;
  PromptImageSpan span;
  // What the prefix cache keys the span's positions by: a hash of the tower's input, so the same
  // image (same pixels, same budget) at the same place reuses its KV and any other image misses.
  uint64_t key = 0;
};

// SipHash-2-4 of the tower input (pixels, positions, grid) under a per-process random key: a
// client cannot craft two images that share a key (an unkeyed hash would let it be served
// another image's cached KV). Stable within a process only.
uint64_t image_content_key(const PromptImage& img);

// The prompt as the prefix cache sees it: token ids, and at each soft-token position a negative
// key drawn from its image's content key and its index in the span (token ids are never negative).
std::vector<int> prefix_keys(const std::vector<int>& prompt, const std::vector<std::shared_ptr<const PromptImage>>& images);

// <|image|>, <|image> and <image|>: config.json's ids, else (a GGUF carries none) the
// vocabulary's pieces (null vocab: config only). Returns the name of the first that has no id
// inside [0, vocab_size) in `missing`, or leaves it empty when all three resolve.
ImageTokenIds resolve_image_token_ids(const ModelConfig& c, const text::Vocabulary* vocab, std::string& missing);

// Expands the placeholders of `prompt` in place, the i-th with soft_counts[i] soft tokens, and
// returns the spans in order. Throws g4::Error naming both numbers when the prompt holds a
// different number of placeholders than there are images (a <|image|> typed into a message's
// text also becomes the placeholder token).
std::vector<PromptImageSpan> expand_image_placeholders(std::vector<int>& prompt, const ImageTokenIds& ids,
                                                       const std::vector<int>& soft_counts);

// The spans of an already expanded prompt (runs of `ids.image` between `begin` and `end`), as
// `g4 logits --tokens` receives them. Throws naming the index of a run without its delimiters.
std::vector<PromptImageSpan> find_image_spans(const std::vector<int>& prompt, const ImageTokenIds& ids);

}  // namespace g4
