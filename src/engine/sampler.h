// Sampler: turns one row of logits into the next token of one sequence.
//
// Pipeline, in this order (each step is skipped when its parameter is off):
//   1. logit bias            logit[t] += bias[t]
//   2. penalties             repetition (HF: divide positive / multiply negative, distinct tokens
//                            of prompt + output in the window), then presence and frequency
//                            (OpenAI, generated tokens only)
//   3. temperature == 0  ->  argmax of the result (lowest id on ties); done, RNG untouched
//   4. temperature           logit /= T
//   5. top-k, 6. top-p, 7. min-p  truncation (top-p's mass is measured within the top-k set;
//                            the three commute once that is fixed, so they are applied in
//                            whichever order is cheapest)
//   8. draw                  one uniform from the sequence's own generator, inverse CDF over the
//                            survivors in a fixed order (a function of the logits only)
//
// Logprobs are the model's own: log_softmax of the *raw* logits, before bias, penalties,
// temperature and truncation (vLLM's default "raw_logprobs" mode). They measure what the model
// believes, not what these sampling settings did to it, so they can be compared with the f32
// reference forward pass whatever the request asked for.
//
// Determinism: the generator is xoshiro256** seeded through splitmix64 (both fully specified
// below, no std:: distributions, whose output is implementation-defined). Each random draw uses
// exactly one 64-bit output, greedy uses none, and nothing is shared between sequences, so the
// same seed gives the same tokens whatever else shares the batch. (Bit-identical results across
// platforms additionally need the same expf(); libm differences of an ulp can flip a draw that
// lands exactly on a boundary.)
//
// Cost for a vocabulary V: everything is O(V) with no full sort. Greedy is one argmax pass (no
// copy when nothing modifies the logits); top-k keeps a bounded heap of k and computes only k
// exponentials; top-p without top-k builds a histogram of probability mass over weight buckets
// and sorts only the bucket where the cumulative mass crosses top_p. Scratch buffers are per
// thread and reused, so a step does not allocate after the first. Hot path never throws: NaN logits count as -inf, history ids outside [0, V) are ignored.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar_matcher.h"
#include "engine/sampling_params.h"

namespace g4 {

// xoshiro256** 1.0 (Blackman & Vigna), state seeded by four outputs of splitmix64(seed).
class SequenceRng {
 public:
  explicit SequenceRng(uint64_t seed);
  uint64_t next_u64();
  double next_unit();  // uniform in [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

struct TokenLogprob {
  int token = -1;
  float logprob = 0.0f;  // log_softmax of the raw logits; -inf for a -inf logit
};

struct SampleResult {
  int token = -1;
  float logprob = 0.0f;                  // of `token`; set only when params.logprobs
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs most likely, best first (ties: lower id)
};

class Sampler {
 public:
  // Validates params against the vocabulary (throws g4::Error) and seeds the generator.
  Sampler(const SamplingParams& params, int vocab_size);

  // logits: [vocab_size] for this sequence's next position. prompt_tokens / generated_tokens: the
  // sequence so far, for the penalties (may be empty when no penalty is active).
  // allowed (may be null): a grammar's mask; tokens outside it get -inf after logit bias and
  // penalties (step 2b), so neither can bring them back. Logprobs stay the model's own.
  SampleResult sample(const float* logits, std::span<const int> prompt_tokens,
                      std::span<const int> generated_tokens, const grammar::TokenMask* allowed = nullptr);

  // Steps 1-2 of the pipeline in place on [vocab_size] logits (logit bias, then penalties):
  // what sample() does before temperature; public so callers can inspect or log it.
  void process_logits(float* logits, std::span<const int> prompt_tokens,
                      std::span<const int> generated_tokens) const;

  const SamplingParams& params() const { return params_; }
  int vocab_size() const { return vocab_size_; }

 private:
  bool modifies_logits() const;
  void apply_penalties(float* logits, std::span<const int> prompt_tokens,
                       std::span<const int> generated_tokens) const;
  int draw(float* logits);  // steps 4-8; overwrites logits with unnormalised probabilities
  void fill_logprobs(const float* raw_logits, SampleResult& result) const;

  SamplingParams params_;
  int vocab_size_;
  SequenceRng rng_;
};

}  // namespace g4
