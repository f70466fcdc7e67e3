#include "text/detokenizer_stream.h"

#include "text/utf8.h"

namespace g4::text {

std::string StreamingDetokenizer::take_run() {
  std::string out;
  if (utf8_valid(pending_run_)) {
    out.swap(pending_run_);
  } else {
    for (size_t i = 0; i < pending_run_.size(); ++i) out += kReplacementChar;
  }
  pending_run_.clear();
  return out;
}

std::string StreamingDetokenizer::push(int32_t id) {
  const Tokenizer& t = *tokenizer_;
  if (!t.vocab().valid_id(id)) return {};
  if (options_.skip_special && t.is_special(id)) return {};
  const int b = t.vocab().byte_value(id);
  if (b >= 0) {
    pending_run_.push_back(char(b));
    return {};
  }
  std::string out = take_run();
  out += t.token_text(id);
  return out;
}

std::string StreamingDetokenizer::finish() { return take_run(); }

}  // namespace g4::text
