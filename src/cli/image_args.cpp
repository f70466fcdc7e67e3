#include "cli/image_args.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "media/image_token_budget.h"
#include "model/vision_gguf.h"
#include "model/vision_interleave.h"
#include "ops/matmul/matmul.h"
#include "model/vision_projector.h"
#include "platform/error.h"
#include "server/image_input.h"

namespace g4::cli {

const std::string kImageHelp =
    "Images (a checkpoint with a vision tower, or a GGUF with --mmproj):\n"
    "  --image FILE         a PNG, JPEG or WebP image (repeatable; in order)\n"
    "  --image-tokens N     soft tokens per image: 70, 140, 280, 560 or 1120 (default: the tower's, 280)\n"
    "  --mmproj FILE        the vision tower from a llama.cpp mmproj GGUF (projector type gemma4v)\n";

std::unique_ptr<VisionModel> load_vision_for(const Args& a, const std::filesystem::path& model_path, Model& m) {
  if (auto f = a.get("--mmproj")) {
    if (m.format == "gguf") infer_image_mask_rule_for_gguf(m.config);
    return load_vision_mmproj(*f, m.config.hidden_size);
  }
  if (std::filesystem::is_directory(model_path)) return load_vision_model(model_path);
  return nullptr;
}

void prepare_vision_kernels(VisionModel* v, const EngineOptions& e, const char* tag) {
  if (!v || e.threads <= 0) return;
  ops::MatmulContext kinds;  // only which kernels the products take
  kinds.bf16_compute = e.bf16_compute;
  if (!ops::reads_bf16_interleaved(kinds)) return;
  ThreadPool pool(e.threads);
  const InterleaveReport r = interleave_vision_weights(*v, &pool);
  if (r.tensors) std::fprintf(stderr, "%s vision tower: %s\n", tag, describe_interleave(r).c_str());
}

ImageTokenIds image_token_ids(const Model& m, const text::Vocabulary* vocab) {
  std::string missing;
  const ImageTokenIds ids = resolve_image_token_ids(m.config, vocab, missing);
  if (!missing.empty())
    throw Error("the image token " + missing + " has no id in config.json" + (vocab ? " or the tokenizer" : ""));
  return ids;
}

int image_tokens_flag(const Args& a, const VisionConfig& vc) {
  const long long n = a.get_int("--image-tokens", vc.default_image_budget());
  try {
    if (n < 0 || n > 1 << 20) throw Error("must be a Gemma 4 image budget");
    media::check_image_token_budget(int(n));
  } catch (const Error& e) {
    throw Error("--image-tokens " + std::to_string(n) + ": " + e.what());
  }
  return int(n);
}

std::vector<std::shared_ptr<PromptImage>> read_image_files(const Args& a, const VisionConfig& vc) {
  const int budget = image_tokens_flag(a, vc);
  std::vector<std::shared_ptr<PromptImage>> out;
  for (const std::string& file : a.get_all("--image")) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(file + ": cannot open the image");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    try {
      out.push_back(server::image_from_bytes(bytes, budget, vc));
    } catch (const Error& e) {
      throw Error(file + ": " + e.what());
    }
  }
  return out;
}

EncodedImages encode_images(const VisionModel& v, const std::vector<std::shared_ptr<PromptImage>>& images,
                            const blocks::Exec& ex) {
  EncodedImages e;
  e.rows.reserve(images.size());
  for (const auto& img : images) {
    const VisionInput in{img->pixel_values, img->positions, img->grid_rows, img->grid_cols};
    e.rows.push_back(encode_image(v.config, v.weights, in, ex));
    e.spans.push_back(SoftSpan{e.rows.back().data(), img->span.first, img->span.count, true});
  }
  return e;
}

}  // namespace g4::cli
