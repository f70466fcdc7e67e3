// Streaming detokenizer: ids in one at a time, text out only at UTF-8 character boundaries,
// so no broken character ever reaches an SSE chunk. The concatenation of everything push()
// and finish() return equals Tokenizer::decode(all ids) with the same options, exactly.
//
// Why byte-fallback runs are held whole: the reference decoder turns a run of <0xNN> pieces
// into text only if the *whole run* is valid UTF-8, and otherwise into one U+FFFD per byte.
// A prefix of a run that looks complete can still be replaced later, so a run is emitted when
// the next non-byte token arrives (or at finish()). Ordinary pieces are whole characters and
// go out at once.
#pragma once
#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace g4::text {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(&tokenizer), options_(options) {}

  // Text that became final with this id (often the piece itself; "" while a byte run is open).
  std::string push(int32_t id);
  // The rest: a pending byte run, as decode() would render it. The stream can then be reused.
  std::string finish();
  // Bytes held back (an open byte-fallback run).
  size_t pending_bytes() const { return pending_run_.size(); }

 private:
  std::string take_run();
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_run_;
};

}  // namespace g4::text
