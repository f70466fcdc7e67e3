#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ops/rows/row_reductions.h"

namespace g4 {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

inline float finite_or_neg_inf(float x) { return std::isnan(x) ? kNegInf : x; }

// Per-thread scratch, sized to the vocabulary on first use: a 262144-token vocabulary would cost
// ~3 MiB per sequence if every Sampler owned these, and they hold nothing between calls.
struct Scratch {
  std::vector<float> logits;       // [V] processed logits, then unnormalised probabilities
  std::vector<int> candidates;     // token ids surviving truncation
  std::vector<uint32_t> seen_mark;  // [V] == mark when a token was already penalised this call
  uint32_t mark = 0;
  std::vector<int> counts;         // [V] generated-token counts; all zero between calls
  std::vector<int> counted;        // ids with a non-zero count, to reset them
  std::vector<std::pair<float, int>> heap;  // top-k selection
  std::vector<double> bucket_mass;  // top-p histogram
  std::vector<int> kept, crossing;  // top-p survivors

  void ensure(int vocab) {
    if (int(logits.size()) != vocab) {
      logits.assign(size_t(vocab), 0.0f);
      seen_mark.assign(size_t(vocab), 0);
      counts.assign(size_t(vocab), 0);
      mark = 0;
    }
  }
  uint32_t next_mark() {
    if (++mark == 0) {  // wrapped: old marks could collide
      std::fill(seen_mark.begin(), seen_mark.end(), 0);
      mark = 1;
    }
    return mark;
  }
};

thread_local Scratch t_scratch;

// Bucket of a weight in [0, 1] by its float bits (monotone for non-negative floats): 8 buckets
// per power of two, bucket 0 holds weight 1 and the last holds 0.
constexpr uint32_t kOneBits = 0x3F800000u;
constexpr uint32_t kWeightBuckets = (kOneBits >> 20) + 1;
inline uint32_t weight_bucket(float weight) {
  uint32_t bits;
  std::memcpy(&bits, &weight, 4);
  return (kOneBits - bits) >> 20;
}

// Lowest id wins ties, so the order is total and the same on every platform.
struct ByValueDesc {
  const float* value;
  bool operator()(int a, int b) const {
    return value[a] > value[b] || (value[a] == value[b] && a < b);
  }
};

}  // namespace

SequenceRng::SequenceRng(uint64_t seed) {
  uint64_t state = seed;
  for (auto& word : s_) word = splitmix64(state);
}

uint64_t SequenceRng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SequenceRng::next_unit() { return double(next_u64() >> 11) * 0x1.0p-53; }

Sampler::Sampler(const SamplingParams& params, int vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed) {
  params_.validate(vocab_size);
}

bool Sampler::modifies_logits() const {
  return !params_.logit_bias.empty() || !params_.banned_token_ids.empty() || params_.repetition_penalty != 1.0f ||
         params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
}

void Sampler::process_logits(float* logits, std::span<const int> prompt_tokens,
                             std::span<const int> generated_tokens) const {
  for (const auto& [token, bias] : params_.logit_bias) logits[token] += bias;
  for (int token : params_.banned_token_ids) logits[token] = kNegInf;
  apply_penalties(logits, prompt_tokens, generated_tokens);
}

void Sampler::apply_penalties(float* logits, std::span<const int> prompt_tokens,
                              std::span<const int> generated_tokens) const {
  Scratch& s = t_scratch;
  s.ensure(vocab_size_);
  const auto in_vocab = [&](int t) { return t >= 0 && t < vocab_size_; };

  if (params_.repetition_penalty != 1.0f) {
    const float penalty = params_.repetition_penalty;
    const uint32_t mark = s.next_mark();
    const auto penalise = [&](int t) {
      if (!in_vocab(t) || s.seen_mark[size_t(t)] == mark) return;
      s.seen_mark[size_t(t)] = mark;
      float& x = logits[t];
      x = x > 0 ? x / penalty : x * penalty;
    };
    // The window is the last repetition_window tokens of prompt followed by output.
    size_t total = prompt_tokens.size() + generated_tokens.size();
    size_t skip = params_.repetition_window > 0 && total > size_t(params_.repetition_window)
                      ? total - size_t(params_.repetition_window)
                      : 0;
    for (size_t i = std::min(skip, prompt_tokens.size()); i < prompt_tokens.size(); ++i) penalise(prompt_tokens[i]);
    size_t gen_skip = skip > prompt_tokens.size() ? skip - prompt_tokens.size() : 0;
    for (size_t i = gen_skip; i < generated_tokens.size(); ++i) penalise(generated_tokens[i]);
  }

  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    s.counted.clear();
    for (int t : generated_tokens) {
      if (!in_vocab(t)) continue;
      if (s.counts[size_t(t)]++ == 0) s.counted.push_back(t);
    }
    for (int t : s.counted) {
      logits[t] -= float(s.counts[size_t(t)]) * params_.frequency_penalty + params_.presence_penalty;
      s.counts[size_t(t)] = 0;
    }
  }
}

namespace {

// exp((x - max) / T): shifted by the max before scaling, so (x - max) / T <= 0 and a tiny T gives
// -inf, never NaN. The most likely token gets weight 1.
struct Weigh {
  float max_logit;
  float inv_t;
  float operator()(float x) const { return std::exp((x - max_logit) * inv_t); }
};

// Top-k, then min-p and top-p within it. Leaves the k best in s.candidates in (probability desc,
// id asc) order with their weights in logits[], then cuts that list; returns the k's total weight.
double truncate_top_k(float* logits, int V, const SamplingParams& p, const Weigh& weight, Scratch& s) {
  std::vector<int>& cand = s.candidates;
  // Bounded heap of the k best (worst on top): most logits lose one compare against the top.
  auto& heap = s.heap;
  heap.clear();
  const size_t k = size_t(p.top_k);
  const auto better = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (int i = 0; i < V; ++i) {
    if (heap.size() == k) {
      if (!better({logits[i], i}, heap.front())) continue;
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = {logits[i], i};
    } else {
      heap.push_back({logits[i], i});
    }
    std::push_heap(heap.begin(), heap.end(), better);
  }
  std::sort_heap(heap.begin(), heap.end(), better);  // best first
  double mass = 0;
  for (const auto& [logit, t] : heap) {
    cand.push_back(t);
    mass += (logits[t] = weight(logit));
  }
  // cand is in (probability desc, id asc) order; min-p keeps a prefix of it.
  if (p.min_p > 0.0f) std::erase_if(cand, [&](int t) { return logits[t] < p.min_p; });
  if (p.top_p < 1.0f) {
    const double target = double(p.top_p) * mass;
    double cum = 0;
    for (size_t i = 0; i < cand.size(); ++i) {
      cum += logits[cand[i]];
      if (cum >= target) {
        cand.resize(i + 1);
        break;
      }
    }
  }
  return mass;
}

// Nucleus without a sort: a histogram of mass over weight buckets finds the bucket where the
// cumulative mass crosses top_p * mass; only that bucket's tokens are sorted. Candidates are
// s.candidates when min-p already chose them, else every id.
void keep_nucleus(const float* logits, int V, float top_p, bool min_p_on, double mass, Scratch& s) {
  std::vector<int>& cand = s.candidates;
  auto& bucket_mass = s.bucket_mass;
  bucket_mass.assign(kWeightBuckets, 0.0);
  const auto each_candidate = [&](auto&& visit) {
    if (min_p_on) {
      for (int t : cand) visit(t);
    } else {
      for (int t = 0; t < V; ++t) visit(t);
    }
  };
  each_candidate([&](int t) { bucket_mass[weight_bucket(logits[t])] += logits[t]; });
  const double target = double(top_p) * mass;
  double cum = 0;
  uint32_t crossing = kWeightBuckets;  // none: the survivors never reach the target, keep all
  for (uint32_t b = 0; b < kWeightBuckets; ++b) {
    if (cum + bucket_mass[b] >= target) {
      crossing = b;
      break;
    }
    cum += bucket_mass[b];
  }
  auto& kept = s.kept;
  auto& crossing_ids = s.crossing;
  kept.clear();
  crossing_ids.clear();
  each_candidate([&](int t) {
    const uint32_t b = weight_bucket(logits[t]);
    if (b < crossing) kept.push_back(t);
    else if (b == crossing) crossing_ids.push_back(t);
  });
  std::sort(crossing_ids.begin(), crossing_ids.end(), ByValueDesc{logits});
  for (int t : crossing_ids) {
    kept.push_back(t);
    cum += logits[t];
    if (cum >= target) break;
  }
  cand.swap(kept);
}

// Inverse CDF over every id in id order (no truncation); strict '>' never lands on a zero weight.
int pick_from_all(const float* logits, int V, double u, double mass) {
  const double target = u * mass;
  double cum = 0;
  int last_positive = 0;
  for (int i = 0; i < V; ++i) {
    if (logits[i] <= 0) continue;
    cum += logits[i];
    last_positive = i;
    if (cum > target) return i;
  }
  return last_positive;  // rounding left target at the very end
}

// Inverse CDF over the surviving candidates, in their order.
int pick_from(const float* logits, const std::vector<int>& cand, double u) {
  double survivors = 0;
  for (int t : cand) survivors += logits[t];
  const double target = u * survivors;
  double cum = 0;
  for (int t : cand) {
    cum += logits[t];
    if (cum > target) return t;
  }
  return cand.back();
}

}  // namespace

int Sampler::draw(float* logits) {
  Scratch& s = t_scratch;
  const int V = vocab_size_;
  // Clamped so a denormal T cannot make 0 * inf = NaN for the top token.
  const float inv_t = std::min(1.0f / params_.temperature, std::numeric_limits<float>::max());

  float max_logit = kNegInf;
  for (int i = 0; i < V; ++i) max_logit = std::max(max_logit, logits[i]);
  if (!(max_logit > kNegInf)) return 0;  // every token impossible: a defined answer, no throw
  const Weigh weight{max_logit, inv_t};

  std::vector<int>& cand = s.candidates;
  const bool top_p_on = params_.top_p < 1.0f;
  const bool min_p_on = params_.min_p > 0.0f;
  bool all_ids = false;  // no candidate list: every id, in id order
  double mass = 0;       // unnormalised probability mass top-p measures against
  cand.clear();

  if (params_.top_k > 0 && params_.top_k < V) {
    mass = truncate_top_k(logits, V, params_, weight, s);
  } else {
    for (int i = 0; i < V; ++i) mass += (logits[i] = weight(logits[i]));
    // From here logits[] holds the weights: the most likely token has weight 1, so min-p
    // (p >= min_p * p_max) is simply weight >= min_p.
    if (min_p_on) {
      for (int i = 0; i < V; ++i)
        if (logits[i] >= params_.min_p) cand.push_back(i);
    }
    if (top_p_on) keep_nucleus(logits, V, params_.top_p, min_p_on, mass, s);
    all_ids = !min_p_on && !top_p_on;
  }

  const double u = rng_.next_unit();
  return all_ids ? pick_from_all(logits, V, u, mass) : pick_from(logits, cand, u);
}

void Sampler::fill_logprobs(const float* raw_logits, SampleResult& result) const {
  const int V = vocab_size_;
  float max_logit = kNegInf;
  for (int i = 0; i < V; ++i) max_logit = std::max(max_logit, finite_or_neg_inf(raw_logits[i]));
  double sum = 0;
  if (max_logit > kNegInf)
    for (int i = 0; i < V; ++i) sum += std::exp(finite_or_neg_inf(raw_logits[i]) - max_logit);  // float exp, double sum
  const double log_z = max_logit > kNegInf ? double(max_logit) + std::log(sum) : 0.0;
  const auto logprob = [&](int t) { return float(double(finite_or_neg_inf(raw_logits[t])) - log_z); };

  result.logprob = logprob(result.token);

  // Top-n by insertion into a small sorted array: n <= 20, and most logits lose the first compare.
  const size_t n = size_t(std::min(params_.top_logprobs, V));
  result.top_logprobs.clear();
  if (n == 0) return;
  std::vector<int> best;
  best.reserve(n + 1);
  const auto better = [&](int a, int b) {
    float xa = finite_or_neg_inf(raw_logits[a]), xb = finite_or_neg_inf(raw_logits[b]);
    return xa > xb || (xa == xb && a < b);
  };
  for (int i = 0; i < V; ++i) {
    if (best.size() == n && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (best.size() > n) best.pop_back();
  }
  for (int t : best) result.top_logprobs.push_back({t, logprob(t)});
}

SampleResult Sampler::sample(const float* logits, std::span<const int> prompt_tokens,
                             std::span<const int> generated_tokens, const grammar::TokenMask* allowed) {
  const int V = vocab_size_;
  SampleResult result;
  const bool greedy = params_.temperature == 0.0f;

  if (greedy && !modifies_logits() && !allowed) {
    // Nothing to change: argmax straight off the model's row, no copy (first maximum; NaN never wins).
    result.token = int(ops::argmax(logits, V));
  } else {
    Scratch& s = t_scratch;
    s.ensure(V);
    float* work = s.logits.data();
    for (int i = 0; i < V; ++i) work[i] = finite_or_neg_inf(logits[i]);
    process_logits(work, prompt_tokens, generated_tokens);
    if (allowed) {
      // Word by word: a fully allowed word (most of them inside a JSON string) costs one compare.
      bool any = false;
      const auto& words = allowed->words();
      for (int base = 0; base < V; base += 64) {
        const uint64_t w = size_t(base >> 6) < words.size() ? words[size_t(base >> 6)] : 0;
        const int n = std::min(64, V - base);
        for (int b = 0; b < n; ++b) {
          if (!((w >> b) & 1)) work[base + b] = kNegInf;
          else any = any || work[base + b] > kNegInf;
        }
      }
      // Every allowed token at -inf (NaN logits, or banned by bias): the lowest allowed id, so
      // the output still follows the grammar.
      if (!any)
        for (int i = 0; i < V; ++i)
          if (allowed->test(i)) {
            work[i] = 0.0f;
            break;
          }
    }
    if (greedy) {
      result.token = int(ops::argmax(work, V));
    } else {
      result.token = draw(work);
    }
  }

  if (params_.logprobs) fill_logprobs(logits, result);
  return result;
}

}  // namespace g4
