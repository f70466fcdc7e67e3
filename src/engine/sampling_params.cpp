#include "engine/sampling_params.h"

#include <cmath>
#include <string>

#include "platform/error.h"

namespace g4 {

namespace {

// OpenAI's documented ranges; values outside them are almost always a unit mistake.
constexpr float kMaxAbsPresenceFrequency = 2.0f;
constexpr float kMaxAbsLogitBias = 100.0f;
constexpr int kMaxTopLogprobs = 20;

[[noreturn]] void fail(const std::string& field, const std::string& value, const std::string& rule) {
  throw Error("sampling parameter " + field + " = " + value + ": " + rule);
}

std::string str(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = std::to_string(v);
  // to_string prints six decimals; trim trailing zeros for readable messages.
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

void SamplingParams::validate(int vocab_size) const {
  if (vocab_size <= 0) fail("vocab_size", std::to_string(vocab_size), "must be positive");
  if (!std::isfinite(temperature) || temperature < 0)
    fail("temperature", str(temperature), "must be finite and >= 0 (0 = greedy)");
  if (top_k < 0) fail("top_k", std::to_string(top_k), "must be >= 0 (0 = off)");
  if (!(top_p > 0 && top_p <= 1)) fail("top_p", str(top_p), "must be in (0, 1] (1 = off)");
  if (!(min_p >= 0 && min_p <= 1)) fail("min_p", str(min_p), "must be in [0, 1] (0 = off)");
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    fail("repetition_penalty", str(repetition_penalty), "must be finite and > 0 (1 = off)");
  if (repetition_window < 0)
    fail("repetition_window", std::to_string(repetition_window), "must be >= 0 (0 = whole context)");
  if (!(std::fabs(presence_penalty) <= kMaxAbsPresenceFrequency))
    fail("presence_penalty", str(presence_penalty), "must be in [-2, 2]");
  if (!(std::fabs(frequency_penalty) <= kMaxAbsPresenceFrequency))
    fail("frequency_penalty", str(frequency_penalty), "must be in [-2, 2]");
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size)
      fail("logit_bias", "{" + std::to_string(token) + ": " + str(bias) + "}",
           "token id out of range [0, " + std::to_string(vocab_size) + ")");
    if (!(std::fabs(bias) <= kMaxAbsLogitBias))
      fail("logit_bias", "{" + std::to_string(token) + ": " + str(bias) + "}", "bias must be in [-100, 100]");
  }
  if (max_tokens <= 0) fail("max_tokens", std::to_string(max_tokens), "must be >= 1");
  for (int token : banned_token_ids)
    if (token < 0 || token >= vocab_size)
      fail("banned_token_ids", std::to_string(token), "token id outside the vocabulary");
  for (int token : stop_token_ids)
    if (token < 0 || token >= vocab_size)
      fail("stop_token_ids", std::to_string(token),
           "token id out of range [0, " + std::to_string(vocab_size) + ")");
  for (size_t i = 0; i < stop_strings.size(); ++i)
    if (stop_strings[i].empty())
      fail("stop_strings[" + std::to_string(i) + "]", "\"\"", "an empty stop string would match everywhere");
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    fail("top_logprobs", std::to_string(top_logprobs), "must be in [0, 20]");
  if (top_logprobs > 0 && !logprobs)
    fail("top_logprobs", std::to_string(top_logprobs), "needs logprobs = true");
}

}  // namespace g4
