// Everything the server holds about the one model it serves: the loaded checkpoint, its tokenizer,
// the stop tokens and chat options resolved from the checkpoint's own files, the dtype policy, and
// what had to be degraded (a Gemma 3 tokenizer lacks Gemma 4's control tokens: the chat template's
// markers are then encoded as plain text, and the server says so in /v1/models and the log).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/prompt_images.h"
#include "model/model.h"
#include "model/vision_model.h"
#include "platform/dtype_policy.h"
#include "text/chat_template.h"
#include "text/stop_tokens.h"
#include "text/tokenizer.h"

namespace g4::server {

struct ServedModel {
  std::string id;  // the name requests use ('model'); default: the directory's base name
  std::filesystem::path dir;
  std::string forward = "f32 reference loops";  // what runs the model; set by the frontend
  std::unique_ptr<Model> model;
  // The vision tower and projector: from the checkpoint directory (its vision_config) or an
  // mmproj GGUF (--mmproj); null for a text-only model, which refuses images.
  std::unique_ptr<VisionModel> vision;
  ImageTokenIds image_ids;          // from config.json, else the tokenizer's pieces
  std::string images_refused;       // empty when images are accepted; else why not
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::filesystem::path tokenizer_path;
  text::StopTokens stops;
  std::vector<std::string> missing_template_tokens;  // empty for a Gemma 4 tokenizer
  bool synthetic = false;                             // config.json carries "g4_synth" (random weights)
  DevicePolicy policy;
  // Set when a GPU runs the model: its name and its policy (gpu_policy_to_json), which /v1/models
  // then shows instead of the CPU's.
  std::string gpu_device;
  nlohmann::json gpu_policy;
  std::vector<std::string> notes;  // degradations and defaults, one sentence each

  // Loads and validates; throws g4::Error naming what is wrong (no tokenizer, vocab mismatch, ...).
  static ServedModel load(const std::filesystem::path& dir, const std::filesystem::path& tokenizer_file,
                          const std::string& name, const std::filesystem::path& mmproj = {});

  // The `g4` block of /v1/models: policy with reasons, device, tokenizer, stops, notes.
  nlohmann::json describe() const;
};

// Chat messages -> prompt ids through the Gemma 4 template. With a tokenizer that lacks the
// template's control tokens, the markers are encoded as plain text (degraded, still one <bos>
// at position 0). Throws g4::Error for malformed messages.
std::vector<int32_t> encode_chat_prompt(const ServedModel& m, const nlohmann::json& messages, const nlohmann::json& tools,
                                        bool enable_thinking);

}  // namespace g4::server
