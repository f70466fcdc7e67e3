#include "engine/model_text.h"

#include "engine/gguf_tokenizer.h"
#include "platform/error.h"

namespace g4 {

std::optional<text::Tokenizer> load_model_tokenizer(const Model& m,
                                                    const std::optional<std::filesystem::path>& tokenizer_file) {
  namespace fs = std::filesystem;
  std::optional<text::Tokenizer> tok;
  std::error_code ec;
  if (tokenizer_file) tok = text::Tokenizer::from_file(*tokenizer_file);
  else if (fs::is_directory(m.path, ec) && fs::exists(m.path / "tokenizer.json")) tok = text::Tokenizer::from_dir(m.path);
  else if (m.gguf) tok = tokenizer_from_gguf(*m.gguf);  // tokenizer.ggml.* metadata
  if (tok && tok->vocab().size() > m.config.vocab_size)
    throw Error("tokenizer has " + std::to_string(tok->vocab().size()) + " tokens but the model's vocabulary is " +
                std::to_string(m.config.vocab_size));
  return tok;
}

std::vector<int32_t> model_eos_ids(const Model& m) {
  std::error_code ec;
  std::vector<int32_t> eos = std::filesystem::is_directory(m.path, ec) ? text::read_config_eos_ids(m.path) : std::vector<int32_t>{};
  if (eos.empty()) eos.assign(m.config.eos_token_ids.begin(), m.config.eos_token_ids.end());
  return eos;
}

text::StopTokens model_stop_tokens(const Model& m, const text::Vocabulary* vocab) {
  const std::vector<int32_t> eos = model_eos_ids(m);
  if (vocab) return text::resolve_stop_tokens(*vocab, eos);
  text::StopTokens s;
  s.ids = eos;
  return s;
}

}  // namespace g4
