// Image flags shared by g4 generate and g4 logits: --image FILE (repeatable), --image-tokens N
// (the budget) and --mmproj FILE (a llama.cpp vision projector beside a GGUF text model).
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "engine/engine.h"
#include "engine/prompt_images.h"
#include "model/executor.h"
#include "model/model.h"
#include "model/soft_tokens.h"
#include "model/vision_model.h"
#include "text/vocab.h"

namespace g4::cli {

extern const std::string kImageHelp;
inline const std::vector<std::string> kImageFlags = {"--image", "--image-tokens", "--mmproj"};

// --mmproj FILE, else the checkpoint directory's vision_config; null when neither has a tower
// (then --image is refused naming why).
std::unique_ptr<VisionModel> load_vision_for(const Args& a, const std::filesystem::path& model_path, Model& m);

// The tower's BF16 matrices interleaved for the kernels the engine `e` runs its products on
// (model/vision_interleave.h), where those read the interleaved layout; a note on stderr
// prefixed `tag`. Nothing without a tower or on the reference loops.
void prepare_vision_kernels(VisionModel* v, const EngineOptions& e, const char* tag);

// <|image|>, <|image> and <image|>: config.json's ids, else the tokenizer's pieces; throws when
// one is missing.
ImageTokenIds image_token_ids(const Model& m, const text::Vocabulary* vocab);

// --image-tokens N, checked against Gemma 4's budgets (naming the flag), else the tower's default.
int image_tokens_flag(const Args& a, const VisionConfig& vc);

// Every --image FILE, decoded and preprocessed at --image-tokens (default: the tower's).
std::vector<std::shared_ptr<PromptImage>> read_image_files(const Args& a, const VisionConfig& vc);

// Soft tokens for each image at its span ([S, H] rows kept in `rows`; spans point into them).
struct EncodedImages {
  std::vector<blocks::Vec> rows;
  std::vector<SoftSpan> spans;
};
EncodedImages encode_images(const VisionModel& v, const std::vector<std::shared_ptr<PromptImage>>& images,
                            const blocks::Exec& ex);

}  // namespace g4::cli
