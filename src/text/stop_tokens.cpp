#include "text/stop_tokens.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "platform/error.h"

namespace g4::text {

bool StopTokens::contains(int32_t id) const { return std::binary_search(ids.begin(), ids.end(), id); }

StopTokens resolve_stop_tokens(const Vocabulary& vocab, std::span<const int32_t> config_eos_ids) {
  StopTokens stop;
  auto by_name = [&](const std::string& piece, const std::string& role) {
    std::string why;
    if (auto id = vocab.special_id(piece, &why)) stop.ids.push_back(*id);
    else stop.problems.push_back(role + ": " + why);
  };
  // Gemma 4's names first; then what tokenizer_config names (Gemma 3 calls its eos <end_of_turn>).
  by_name("<eos>", "stop token <eos>");
  by_name("<turn|>", "stop token <turn|> (end of turn)");
  by_name("<|tool_response>", "stop token <|tool_response> (end of a tool-calling turn)");
  for (const char* role : {"eos_token", "eot_token"})
    if (auto piece = vocab.named_piece(role)) by_name(*piece, std::string("tokenizer_config ") + role);
  for (int32_t id : config_eos_ids) {
    if (!vocab.valid_id(id)) {
      stop.problems.push_back("config eos_token_id " + std::to_string(id) + " is outside the vocabulary of " +
                              vocab.source());
    } else if (vocab.unk_id() && id == *vocab.unk_id()) {
      stop.problems.push_back("config eos_token_id " + std::to_string(id) + " is the unknown token");
    } else {
      stop.ids.push_back(id);
    }
  }
  std::sort(stop.ids.begin(), stop.ids.end());
  stop.ids.erase(std::unique(stop.ids.begin(), stop.ids.end()), stop.ids.end());
  return stop;
}

namespace {

void collect_eos(const nlohmann::json& j, const std::string& where, std::vector<int32_t>& out) {
  if (!j.is_object() || !j.contains("eos_token_id")) return;
  const auto& v = j["eos_token_id"];
  auto one = [&](const nlohmann::json& x) {
    if (!x.is_number_integer()) throw Error(where + ": eos_token_id holds " + x.dump() + ", not an integer id");
    out.push_back(int32_t(x.get<int64_t>()));
  };
  if (v.is_array()) {
    for (const auto& x : v) one(x);
  } else if (!v.is_null()) {
    one(v);
  }
}

}  // namespace

std::vector<int32_t> read_config_eos_ids(const std::filesystem::path& dir) {
  std::vector<int32_t> ids;
  for (const char* name : {"generation_config.json", "config.json"}) {
    const auto path = dir / name;
    if (!std::filesystem::is_regular_file(path)) continue;
    std::ifstream f(path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      throw Error(path.string() + ": invalid JSON: " + e.what());
    }
    collect_eos(j, path.string(), ids);
    if (j.is_object() && j.contains("text_config")) collect_eos(j["text_config"], path.string() + " text_config", ids);
  }
  return ids;
}

}  // namespace g4::text
