#include "engine/gguf_tokenizer.h"

#include <unordered_map>

#include "platform/error.h"
#include "text/gguf_vocab.h"

namespace g4 {

namespace {

// (GGUF key suffix, tokenizer_config role)
const std::pair<const char*, const char*> kSpecial[] = {
    {"bos_token_id", "bos_token"},     {"eos_token_id", "eos_token"}, {"unknown_token_id", "unk_token"},
    {"padding_token_id", "pad_token"}, {"eot_token_id", "eot_token"},
};

}  // namespace

std::optional<text::Tokenizer> tokenizer_from_gguf(const GgufFile& g) {
  const std::string file = g.path().string();
  const GgufValue* toks = g.find("tokenizer.ggml.tokens");
  if (!toks) return std::nullopt;
  auto fail = [&](const std::string& key, const std::string& why) -> void {
    const GgufValue* v = g.find(key);
    throw Error(file + ": metadata '" + key + "'" + (v ? " (byte " + std::to_string(v->offset) + ")" : "") + ": " + why);
  };
  if (auto model = g.get_string("tokenizer.ggml.model"); model && *model != "gemma4" && *model != "gpt2" && *model != "llama")
    fail("tokenizer.ggml.model", "= \"" + *model + "\": g4 reads Gemma's BPE vocabulary (gemma4)");
  if (toks->type != GgufType::ARRAY || toks->elem_type != GgufType::STRING) fail("tokenizer.ggml.tokens", "must be an array of strings");
  text::GgufTokenizerArrays a;
  a.source = file;
  a.tokens.assign(toks->strings.begin(), toks->strings.end());
  if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
    if (!t->is_numeric_array() || t->elem_type == GgufType::F32 || t->elem_type == GgufType::F64)
      fail("tokenizer.ggml.token_type", "must be an array of integers");
    for (uint64_t i = 0; i < t->count; ++i) a.token_types.push_back(int32_t(t->int_at(i)));
  }
  if (const GgufValue* s = g.find("tokenizer.ggml.scores")) {
    if (!s->is_numeric_array()) fail("tokenizer.ggml.scores", "must be an array of numbers");
    if (s->count != toks->count)
      fail("tokenizer.ggml.scores", "has " + std::to_string(s->count) + " entries for " + std::to_string(toks->count) + " tokens");
    for (uint64_t i = 0; i < s->count; ++i) a.scores.push_back(float(s->float_at(i)));
  }
  if (const GgufValue* m = g.find("tokenizer.ggml.merges")) {
    if (m->type != GgufType::ARRAY || m->elem_type != GgufType::STRING) fail("tokenizer.ggml.merges", "must be an array of strings");
    a.merges.assign(m->strings.begin(), m->strings.end());
  }
  for (const auto& [key, role] : kSpecial)
    if (auto id = g.get_int(std::string("tokenizer.ggml.") + key)) a.special_ids[role] = *id;
  if (auto b = g.get_bool("tokenizer.ggml.add_bos_token")) a.add_bos = *b;
  if (g.get_bool("tokenizer.ggml.add_space_prefix").value_or(false))
    fail("tokenizer.ggml.add_space_prefix", "is true; Gemma 4's tokenizer adds no space prefix");
  return text::Tokenizer(text::Vocabulary(text::vocabulary_spec_from_gguf(std::move(a))));
}

void add_tokenizer_metadata(GgufWriter& w, const text::VocabularySpec& spec) {
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_string("tokenizer.ggml.pre", "gemma4");
  w.set_array_string("tokenizer.ggml.tokens", spec.pieces);
  std::vector<float> scores = spec.scores;
  if (scores.empty()) scores.assign(spec.pieces.size(), 0.0f);
  w.set_array_f32("tokenizer.ggml.scores", scores);
  std::vector<int32_t> types;
  for (auto t : spec.types) types.push_back(int32_t(t));
  // Added tokens the tokenizer.json marks as matched in raw text must stay so in GGUF
  // (control or user-defined); plain pieces stay normal.
  for (int32_t id : spec.added_token_ids) {
    auto& t = types[size_t(id)];
    if (t != int32_t(text::TokenType::Control) && t != int32_t(text::TokenType::UserDefined))
      t = int32_t(text::TokenType::UserDefined);
  }
  w.set_array_i32("tokenizer.ggml.token_type", types);
  std::vector<std::string> merges;
  merges.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r)
    merges.push_back(std::string(spec.merges.left(r)) + " " + std::string(spec.merges.right(r)));
  w.set_array_string("tokenizer.ggml.merges", merges);
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < spec.pieces.size(); ++i) ids.emplace(spec.pieces[i], int32_t(i));
  for (const auto& [key, role] : kSpecial) {
    auto it = spec.named_tokens.find(role);
    if (it == spec.named_tokens.end()) continue;
    auto id = ids.find(it->second);
    if (id != ids.end()) w.set_u32(std::string("tokenizer.ggml.") + key, uint32_t(id->second));
  }
  w.set_bool("tokenizer.ggml.add_bos_token", spec.add_bos);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
}

}  // namespace g4
