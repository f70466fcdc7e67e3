// Named Gemma 4 geometries: the released sizes (spec section 1) and tiny test models with the
// same features as the shared fixtures. Used by `g4 synth` and tests.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/assistant_config.h"
#include "model/vision_config.h"

namespace g4 {

// Throws g4::Error listing the known names when `name` is unknown.
// "NAME-vision" is preset NAME's text decoder with its vision tower (preset_vision_config), and
// the multimodal token ids of the released files (moved to 500..506 below a 258,885-id vocab).
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// The vision tower of a "-vision" preset (tiny-e-vision, e2b-vision, e4b-vision, 26b-a4b-vision,
// 31b-vision); nullopt for a text-only preset. Throws g4::Error for an unknown name.
std::optional<VisionConfig> preset_vision_config(const std::string& name);

// The multimodal token ids for a vocabulary of vocab_size ids: the released ones (<|image>
// 255999, <|image|> 258880, <image|> 258882, ...) when the vocab reaches them, else the tiny
// fixtures' 500..506 (boi, image, eoi, video, audio, boa, eoa). Sets them on `c`.
void set_media_token_ids(ModelConfig& c);

// Assistant drafters for the target presets: tiny-assistant (for tiny-e, with the centroid head)
// and e2b-assistant / e4b-assistant (the released E2B and E4B assistants' geometry, for e2b / e4b).
AssistantConfig preset_assistant_config(const std::string& name);
std::vector<std::string> preset_assistant_names();

}  // namespace g4
