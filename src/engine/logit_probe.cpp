#include "engine/logit_probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "platform/error.h"

namespace g4 {

std::vector<int> probe_tokens(const ModelConfig& c, int64_t n) {
  if (n < 1) throw Error("probe_tokens: need at least 1 token, got " + std::to_string(n));
  if (c.vocab_size < 8) throw Error("probe_tokens: vocab_size " + std::to_string(c.vocab_size) + " is too small");
  std::vector<int> t(static_cast<size_t>(n));
  t[0] = c.bos_token_id;
  // A stride prime to any vocabulary size we meet walks the ids away from the special ones (< 4).
  for (int64_t i = 1; i < n; ++i) t[size_t(i)] = int(4 + (i * 7919) % (c.vocab_size - 4));
  return t;
}

std::vector<float> probe_logits(const Model& m, const std::vector<int>& tokens, const blocks::Exec& ex) {
  KvCacheOptions ko;  // f32 K/V: the probe measures the weights, not the cache's rounding
  ko.max_total_tokens = (int64_t(tokens.size()) + ko.block_tokens) / ko.block_tokens * ko.block_tokens;
  KvCache kv(m.config, ko);
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (size_t t = 0; t < tokens.size(); ++t) rows.push_back({seq, int64_t(t), tokens[t], true});
  return forward_cached(m, rows, kv, ex);
}

namespace {

// log Σ exp(row), in double.
double log_sum_exp(const float* row, int64_t n) {
  const double mx = *std::max_element(row, row + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  return mx + std::log(s);
}

}  // namespace

LogitShift compare_logits(const std::vector<float>& ref, const std::vector<float>& got, int64_t vocab) {
  if (vocab < 1 || ref.empty() || ref.size() % size_t(vocab) != 0)
    throw Error("compare_logits: " + std::to_string(ref.size()) + " reference logits are not whole rows of " +
                std::to_string(vocab));
  if (got.size() != ref.size())
    throw Error("compare_logits: " + std::to_string(got.size()) + " logits against " + std::to_string(ref.size()) +
                " reference logits");
  LogitShift s;
  s.vocab = vocab;
  s.rows = int64_t(ref.size()) / vocab;
  double sum_abs = 0, sum_d2 = 0, sum_r2 = 0, sum_kl = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* a = ref.data() + r * vocab;
    const float* b = got.data() + r * vocab;
    for (int64_t i = 0; i < vocab; ++i)
      if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
        throw Error("compare_logits: row " + std::to_string(r) + ", logit " + std::to_string(i) + " is not finite (" +
                    std::to_string(a[i]) + " reference, " + std::to_string(b[i]) + ")");
    const double la = log_sum_exp(a, vocab), lb = log_sum_exp(b, vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      const double d = double(b[i]) - double(a[i]);
      s.max_abs = std::max(s.max_abs, std::fabs(d));
      sum_abs += std::fabs(d);
      sum_d2 += d * d;
      sum_r2 += double(a[i]) * double(a[i]);
      const double lpa = double(a[i]) - la, lpb = double(b[i]) - lb;  // log-probabilities
      kl += std::exp(lpa) * (lpa - lpb);
    }
    kl = std::max(0.0, kl);  // a sum of tiny negative roundings is still no divergence
    sum_kl += kl;
    s.max_kl = std::max(s.max_kl, kl);
    if (std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b) ++s.top1_same;
  }
  const double n = double(ref.size());
  s.mean_abs = sum_abs / n;
  s.rms_ratio = sum_r2 > 0 ? std::sqrt(sum_d2 / sum_r2) : (sum_d2 > 0 ? INFINITY : 0.0);
  s.mean_kl = sum_kl / double(s.rows);
  return s;
}

std::string describe_logit_shift(const LogitShift& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "max |delta| %.3f, mean |delta| %.4f, rms delta / rms %.2f%%, KL mean %.2g max %.2g nats, top-1 same %lld/%lld",
                s.max_abs, s.mean_abs, 100.0 * s.rms_ratio, s.mean_kl, s.max_kl, (long long)s.top1_same,
                (long long)s.rows);
  return buf;
}

}  // namespace g4
