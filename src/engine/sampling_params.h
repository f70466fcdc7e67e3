// SamplingParams: everything a request says about how to pick tokens and when to stop.
// Validated once, when the request is accepted; the sampler and stop matcher trust it afterwards.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace g4 {

struct SamplingParams {
  // 0 = greedy (argmax after logit bias and penalties; the RNG is not touched).
  float temperature = 1.0f;
  int top_k = 0;         // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;    // nucleus: smallest set whose probability reaches top_p; 1 = off
  float min_p = 0.0f;    // drop tokens with p < min_p * p(most likely); 0 = off

  // HF / llama.cpp semantics: for every distinct token seen in the last repetition_window tokens
  // of prompt + generated output, a positive logit is divided by the penalty, a negative one
  // multiplied by it. 1 = off.
  float repetition_penalty = 1.0f;
  int repetition_window = 0;  // 0 = the whole prompt + output

  // OpenAI semantics, over generated tokens only:
  // logit[t] -= count[t] * frequency_penalty + (count[t] > 0) * presence_penalty.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  // Added to the raw logit of a token id before anything else (OpenAI: -100 bans, +100 forces).
  std::map<int, float> logit_bias;
  // Never sampled (-inf after the logit bias): tool_choice "none" bans <|tool_call>.
  std::vector<int> banned_token_ids;

  // Seeds the sequence's own generator (xoshiro256** via splitmix64, see sampler.h), so the same
  // seed gives the same tokens on every platform and whatever else shares the batch.
  uint64_t seed = 0;

  int max_tokens = 256;                    // finish reason "length" after this many tokens
  std::vector<int> stop_token_ids;         // finish reason "stop"; the token is not emitted
  std::vector<std::string> stop_strings;   // finish reason "stop"; the match is not emitted

  bool logprobs = false;  // report the chosen token's log-probability
  int top_logprobs = 0;   // and this many most likely alternatives (0..20, needs logprobs)

  // Throws g4::Error naming the first bad field and its value.
  void validate(int vocab_size) const;
};

}  // namespace g4
