// Named Gemma 4 geometries: the released sizes (spec section 1) and tiny test models with the
// same features as the shared fixtures. Used by `g4 synth` and tests.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"
#include "model/assistant_config.h"

namespace g4 {

// Throws g4::Error listing the known names when `name` is unknown.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// Assistant drafters for the target presets: tiny-assistant (for tiny-e, with the centroid head)
// and e2b-assistant (the released E2B assistant's geometry, for e2b).
AssistantConfig preset_assistant_config(const std::string& name);
std::vector<std::string> preset_assistant_names();

}  // namespace g4
