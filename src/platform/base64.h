// Strict base64 (RFC 4648, standard alphabet) decoding for data: URLs. Padding is optional;
// whitespace is not allowed (OpenAI clients send one unbroken string). A bad character is
// reported with its offset, so a client can find the damage.
#pragma once
#include <string>
#include <string_view>

namespace g4 {

// Decodes `text`; throws g4::Error naming the offset of the first invalid character, a
// misplaced '=' or a length that no base64 encoding has (4k + 1 characters).
std::string base64_decode(std::string_view text);

}  // namespace g4
