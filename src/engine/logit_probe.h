// How far re-encoding the weights at load (`--weights q8|q4`) moves the logits: a short fixed
// token sequence run through the cached forward pass before and after, compared row by row.
// The comparison is plain arithmetic over two [T, V] logit sets; the probe's tokens are fixed
// so that two runs (and two binaries) see the same input.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/executor.h"
#include "model/model.h"

namespace g4 {

// n >= 1 tokens: <bos>, then ids spread over the vocabulary (the same for every call).
std::vector<int> probe_tokens(const ModelConfig& c, int64_t n);

// The logits after every token of `tokens` ([T, V], row t = after token t), one cached forward
// pass over a fresh f32 KV cache with `ex` (ex.matmul null: the reference loops).
std::vector<float> probe_logits(const Model& m, const std::vector<int>& tokens, const blocks::Exec& ex);

// `got` against `ref`, both [rows, vocab].
struct LogitShift {
  int64_t rows = 0, vocab = 0;
  double max_abs = 0;    // max |got - ref| over every logit
  double mean_abs = 0;   // mean |got - ref|
  double rms_ratio = 0;  // rms(got - ref) / rms(ref)
  double mean_kl = 0;    // mean over rows of KL(softmax(ref) || softmax(got)), nats
  double max_kl = 0;     // the largest row's
  int64_t top1_same = 0;  // rows whose argmax is the same index
};
// Throws g4::Error when the sizes differ, are not whole rows of `vocab`, or hold a non-finite value.
LogitShift compare_logits(const std::vector<float>& ref, const std::vector<float>& got, int64_t vocab);

// One line: "max |delta| 0.412, mean |delta| 0.0310, rms delta / rms 1.90%, KL mean 0.0012 max
// 0.004 nats, top-1 same 8/8".
std::string describe_logit_shift(const LogitShift& s);

}  // namespace g4
