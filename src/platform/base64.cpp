#include "platform/base64.h"

#include <array>

#include "platform/error.h"

namespace g4 {

namespace {

constexpr std::array<int8_t, 256> decoding_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = int8_t(i);
  return t;
}

}  // namespace

std::string base64_decode(std::string_view text) {
  static constexpr auto kTable = decoding_table();
  size_t n = text.size();
  size_t pad = 0;
  while (pad < 2 && n > 0 && text[n - 1] == '=') --n, ++pad;
  std::string out;
  out.reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = kTable[uint8_t(text[i])];
    if (v < 0) {
      const char c = text[i];
      const std::string shown = c == '=' ? "'=' before the end"
                                : (uint8_t(c) >= 0x20 && uint8_t(c) < 0x7f) ? std::string("'") + c + "'"
                                                                             : "byte " + std::to_string(uint8_t(c));
      throw Error("base64: invalid character " + shown + " at offset " + std::to_string(i));
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  // Checked after the characters, so a stray character is named rather than the length it skews.
  if (pad > 0 && (n + pad) % 4 != 0)
    throw Error("base64: padding '=' at offset " + std::to_string(n) + " does not end a 4-character group");
  if (n % 4 == 1) throw Error("base64: " + std::to_string(n) + " characters is not a valid length (one too many or lost)");
  return out;
}

}  // namespace g4
