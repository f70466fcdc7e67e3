// libFuzzer target: config.json (nlohmann parse, then g4::parse_config and g4::parse_vision_config).
// Asserts: refusals are g4::Error with a message (a JSON type error escaping either parser is a
// finding); an accepted config round-trips through config_to_json -> parse_config to the same JSON.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "model/config.h"
#include "model/vision_config.h"

using namespace g4;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // load_config refuses unparsable files before parse_config
  try {
    ModelConfig c = parse_config(j, "fuzz/config.json");
    nlohmann::json out = config_to_json(c);
    ModelConfig again = parse_config(out, "fuzz/roundtrip.json");
    G4_FUZZ_CHECK(config_to_json(again) == out);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  try {
    (void)parse_vision_config(j, "fuzz/config.json");
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
