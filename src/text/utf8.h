// Small UTF-8 helpers shared by the tokenizer, the streaming detokenizer and the template.
// Tokenizer input may be any bytes; these helpers never read past the view they are given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace g4::text {

// Length of a well-formed UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are
// not one (stray continuation byte, overlong form, surrogate, truncated sequence, > U+10FFFF).
// Callers treat a 0 as "one raw byte" (which the tokenizer sends to byte fallback).
size_t utf8_char_length(std::string_view s, size_t i);

// Decodes the well-formed sequence of utf8_char_length(s, i) bytes at s[i].
uint32_t utf8_decode_at(std::string_view s, size_t i, size_t length);

// True when the whole view is well-formed UTF-8.
bool utf8_valid(std::string_view s);

// Appends the UTF-8 encoding of code point cp (cp must be a scalar value).
void utf8_append(std::string& out, uint32_t cp);

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space, as UTF-8.
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";
// U+FFFD REPLACEMENT CHARACTER, what a broken byte-fallback run decodes to (once per byte).
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace g4::text
