// Reading config.json files: the file itself (read_config_json) and one JSON object's fields
// (ConfigFields), each problem refused with the file, the field and its value. Shared by the text
// decoder's, the drafter's and the vision tower's configs.
#pragma once
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace g4 {

// The parsed file; throws g4::Error "<path>: cannot open" or "<path>: malformed JSON ..." (with
// the byte offset of a syntax error).
nlohmann::json read_config_json(const std::filesystem::path& path);

// Typed reads of one object's fields. Every key read is recorded in `used`, so the caller can
// find the keys nobody read. A null value counts as absent.
struct ConfigFields {
  const nlohmann::json& j;
  std::string where;  // "file: text_config"
  std::set<std::string> used;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const;
  bool present(const std::string& key);
  // nullopt fallback: the field is required.
  int get_int(const std::string& key, std::optional<int> fallback, int min_value = 0);
  double get_double(const std::string& key, double fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
};

}  // namespace g4
