#include "model/config_fields.h"

#include <fstream>

#include "platform/error.h"

namespace g4 {

using json = nlohmann::json;

json read_config_json(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) throw Error(path.string() + ": cannot open");
  try {
    return json::parse(f);
  } catch (const json::parse_error& e) {
    throw Error(path.string() + ": malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const json::exception& e) {  // out_of_range.406: a number too large
    throw Error(path.string() + ": malformed JSON: " + e.what());
  }
}

void ConfigFields::fail(const std::string& key, const std::string& why) const {
  std::string val = j.contains(key) ? j.at(key).dump() : "(absent)";
  if (val.size() > 120) val = val.substr(0, 117) + "...";
  throw Error(where + ": field '" + key + "' = " + val + ": " + why);
}

bool ConfigFields::present(const std::string& key) {
  used.insert(key);
  return j.contains(key) && !j.at(key).is_null();
}

int ConfigFields::get_int(const std::string& key, std::optional<int> fallback, int min_value) {
  if (!present(key)) {
    if (!fallback) fail(key, "required field is missing");
    return *fallback;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(key, "must be an integer");
  const long long x = v.get<long long>();
  if (x < min_value || x > (1ll << 31) - 1) fail(key, "out of range (min " + std::to_string(min_value) + ")");
  return int(x);
}

double ConfigFields::get_double(const std::string& key, double fallback) {
  if (!present(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) fail(key, "must be a number");
  return v.get<double>();
}

bool ConfigFields::get_bool(const std::string& key, bool fallback) {
  if (!present(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) fail(key, "must be true or false");
  return v.get<bool>();
}

std::string ConfigFields::get_string(const std::string& key, const std::string& fallback) {
  if (!present(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_string()) fail(key, "must be a string");
  return v.get<std::string>();
}

}  // namespace g4
