// Speculative decoding never changes an answer. The truth is plain decoding in the same engine
// configuration (and, for greedy, the fixtures' continuations): tokens, logprobs and text must be
// identical, bit for bit, whatever the drafter proposes. Adversarial drafters: random tokens
// (every rollback length), the true continuation (always accepted: the bonus token, k = k_max),
// and the true continuation corrupted at a random place (every accept length).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <random>

#include "engine/cache_feed.h"
#include "engine/assistant_drafter.h"
#include "engine/engine.h"
#include "model/assistant.h"
#include "model/dense_kv_store.h"
#include "model/forward_reference.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace speculative_test {

struct Out {
  std::vector<int> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> tops;
  std::string text, finish;
  int finished = 0;
  SpeculationStats spec;
};

// Events by (request index, choice).
using Outs = std::map<std::pair<int, int>, Out>;

// The true continuation with one token (at a random place, half the time) replaced.
class CorruptedReplay : public Drafter {
 public:
  CorruptedReplay(std::vector<int> script, int vocab, unsigned seed) : inner_(std::move(script)), vocab_(vocab), rng_(seed) {}
  std::vector<int> propose(const DraftContext& c, int k) override {
    auto d = inner_.propose(c, k);
    if (!d.empty() && rng_() % 2) {
      int& t = d[rng_() % d.size()];
      t = (t + 1 + int(rng_() % unsigned(vocab_ - 1))) % vocab_;
    }
    return d;
  }
  std::string name() const override { return "corrupted-replay"; }

 private:
  ReplayDrafter inner_;
  int vocab_;
  std::mt19937 rng_;
};

// Text for stop strings: token 7 -> "[7]" (no tokenizer involved).
class BracketText : public TokenTextStream {
 public:
  std::string push(int t) override { return "[" + std::to_string(t) + "]"; }
  std::string flush() override { return ""; }
};

Outs run(const Model& m, EngineOptions o, const std::vector<GenerationRequest>& reqs) {
  Engine eng(m, o, [] { return std::make_unique<BracketText>(); });
  Outs out;
  for (size_t i = 0; i < reqs.size(); ++i)
    eng.submit(reqs[i], [&out, i](const GenerationEvent& e) {
      Out& c = out[{int(i), e.choice}];
      c.text += e.text;
      for (const auto& t : e.tokens) {
        c.tokens.push_back(t.token);
        c.logprobs.push_back(t.logprob);
        c.tops.push_back(t.top_logprobs);
      }
      if (e.finished) {
        ++c.finished;
        c.finish = e.finish_reason;
        c.spec = e.spec;
      }
    });
  eng.run_until_idle();
  return out;
}

void expect_same(const Outs& plain, const Outs& spec, const std::string& what) {
  ASSERT_EQ(plain.size(), spec.size()) << what;
  for (const auto& [key, p] : plain) {
    const Out& s = spec.at(key);
    EXPECT_EQ(s.finished, 1) << what;
    EXPECT_EQ(p.tokens, s.tokens) << what << " request " << key.first << " choice " << key.second;
    EXPECT_EQ(p.finish, s.finish) << what;
    EXPECT_EQ(p.text, s.text) << what;
    ASSERT_EQ(p.logprobs.size(), s.logprobs.size()) << what;
    for (size_t i = 0; i < p.logprobs.size(); ++i) {
      EXPECT_EQ(p.logprobs[i], s.logprobs[i]) << what << " token " << i;  // bit-identical rows
      ASSERT_EQ(p.tops[i].size(), s.tops[i].size());
      for (size_t j = 0; j < p.tops[i].size(); ++j) EXPECT_EQ(p.tops[i][j].logprob, s.tops[i][j].logprob);
    }
  }
}

enum class Adversary { Random, Truth, Corrupted };
const char* name_of(Adversary a) { return a == Adversary::Random ? "random" : a == Adversary::Truth ? "truth" : "corrupted"; }

// An engine whose requests draft with `a`; `truth` holds plain decoding's output per request.
EngineOptions with_drafter(EngineOptions o, Adversary a, int vocab, const std::vector<GenerationRequest>& reqs,
                           const Outs& truth, int k_max) {
  o.speculative.mode = SpecMode::Draft;
  o.speculative.k_max = k_max;
  o.speculative.make_drafter = [=](const GenerationRequest& r, int choice) -> std::unique_ptr<Drafter> {
    // Which request this is (a choice's copy carries seed + choice).
    size_t i = 0;
    while (i < reqs.size() && !(reqs[i].prompt == r.prompt && reqs[i].n == r.n &&
                                reqs[i].sampling.seed + uint64_t(choice) == r.sampling.seed &&
                                reqs[i].sampling.stop_token_ids == r.sampling.stop_token_ids))
      ++i;
    const auto& script = truth.at({int(i), choice}).tokens;
    const unsigned seed = unsigned(i * 31 + size_t(choice));
    if (a == Adversary::Random) return std::make_unique<RandomDrafter>(vocab, seed, /*vary_length=*/true);
    if (a == Adversary::Truth) return std::make_unique<ReplayDrafter>(script);
    return std::make_unique<CorruptedReplay>(script, vocab, seed);
  };
  return o;
}

GenerationRequest request(std::vector<int> prompt, float temperature, uint64_t seed, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temperature;
  r.sampling.top_k = temperature > 0 ? 40 : 0;
  r.sampling.seed = seed;
  r.sampling.max_tokens = max_tokens;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;
  return r;
}

class SpeculativeSynth : public test::WindowedSynthSuite<SpeculativeSynth> {};

// Windows of 4, 48 generated tokens: the rings wrap through every rollback. Three sequences
// decode side by side with different accept lengths each step; greedy and seeded sampling; the
// reference loops and the SIMD kernels.
TEST_F(SpeculativeSynth, EveryAdversaryGivesPlainDecodingsOutput) {
  for (const char* p : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    auto m = model(p);
    const int V = int(m->config.vocab_size);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 3; ++i)
      reqs.push_back(request(test::random_tokens(5 + 3 * size_t(i), V, unsigned(40 + i)), i == 0 ? 0.0f : 1.0f,
                             uint64_t(7 + i), 48));
    for (int threads : {0, 2}) {
      EngineOptions o;
      o.max_seqs = 3;
      o.threads = threads;
      const Outs plain = run(*m, o, reqs);
      for (Adversary a : {Adversary::Random, Adversary::Truth, Adversary::Corrupted}) {
        const Outs spec = run(*m, with_drafter(o, a, V, reqs, plain, 6), reqs);
        expect_same(plain, spec, std::string(p) + " " + name_of(a) + " threads " + std::to_string(threads));
        int64_t drafted = 0, accepted = 0;
        for (const auto& [k, s] : spec) drafted += s.spec.drafted, accepted += s.spec.accepted;
        EXPECT_GT(drafted, 0) << p << " " << name_of(a);
        if (a == Adversary::Truth) {
          EXPECT_EQ(accepted, drafted) << p;  // every draft stands
        }
        if (a == Adversary::Corrupted) {
          EXPECT_LT(accepted, drafted) << p;
        }
      }
    }
  }
}

// Independent truth: the fixtures' greedy continuations (made by llama.cpp and a numpy reference)
// come out under speculation too, with drafts replaying the fixture's own tokens (every draft
// accepted) and with random drafts (every rollback length), two prompts decoding side by side.
TEST(SpeculativeFixture, GreedyContinuationsMatchTheFixtures) {
  for (const char* v : {"tiny-e", "tiny-31b", "tiny-moe"}) {
    const auto dir = test::fixtures_dir() / "gemma4-tiny" / v;
    auto m = load_model(dir / "hf");
    const auto exp = nlohmann::json::parse(test::read_file(dir / "expected.json"));
    std::vector<GenerationRequest> reqs;
    std::vector<std::vector<int>> want;
    for (const auto& seq : exp["sequences"]) {
      reqs.push_back(request(seq["tokens"].get<std::vector<int>>(), 0.0f, 0, exp["n_greedy"].get<int>()));
      want.push_back(seq["greedy_tokens_llamacpp"].get<std::vector<int>>());
    }
    for (Adversary a : {Adversary::Truth, Adversary::Random}) {
      Outs truth;
      for (size_t i = 0; i < want.size(); ++i) truth[{int(i), 0}].tokens = want[i];
      EngineOptions o;
      o.max_seqs = 2;
      const Outs spec = run(*m, with_drafter(o, a, int(m->config.vocab_size), reqs, truth, 4), reqs);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(spec.at({int(i), 0}).tokens, want[i]) << v << " sequence " << i << " " << name_of(a);
        if (a == Adversary::Truth) {
          EXPECT_EQ(spec.at({int(i), 0}).spec.accepted, spec.at({int(i), 0}).spec.drafted);
        }
      }
    }
  }
}

// The true continuation is always accepted, so a verify step yields k_max + 1 tokens: one pass
// over the weights per k_max + 1 tokens.
TEST_F(SpeculativeSynth, TheTrueContinuationYieldsKPlusOneTokensPerStep) {
  auto m = model("tiny-e");
  const int V = int(m->config.vocab_size);
  const std::vector<GenerationRequest> reqs{request(test::random_tokens(6, V, 3), 0.0f, 0, 41)};
  const Outs plain = run(*m, {}, reqs);
  const Outs spec = run(*m, with_drafter({}, Adversary::Truth, V, reqs, plain, 4), reqs);
  expect_same(plain, spec, "truth");
  const SpeculationStats& st = spec.at({0, 0}).spec;
  ASSERT_EQ(spec.at({0, 0}).tokens.size(), 41u) << spec.at({0, 0}).finish;
  // 41 tokens: the first from the prompt's row, then 8 steps of 5.
  EXPECT_EQ(st.verify_steps, 8);
  EXPECT_EQ(st.accepted, 32);
  ASSERT_EQ(st.accepted_at.size(), 4u);
  EXPECT_EQ(st.accepted_at[3], 8);
}

// Stop tokens and stop strings that end the output in the middle of an accepted run, n > 1
// choices, and the prefix cache (a second turn restoring the first's KV) with speculation.
TEST_F(SpeculativeSynth, StopsChoicesAndPrefixCacheUnderSpeculation) {
  auto m = model("tiny-31b");
  const int V = int(m->config.vocab_size);
  std::vector<GenerationRequest> reqs{request(test::random_tokens(7, V, 5), 1.0f, 3, 40)};
  reqs.push_back(reqs[0]);
  reqs[1].n = 3;
  EngineOptions o;
  o.max_seqs = 4;
  o.prefix_cache_bytes = 64 << 20;
  o.prefix_cache_min_tokens = 2;
  const Outs first = run(*m, o, reqs);
  // A stop token the output reaches at its 12th token: it falls inside a run of drafts; a stop
  // string spanning the 8th and 9th tokens' text for another choice.
  reqs[0].sampling.stop_token_ids = {first.at({0, 0}).tokens[11]};
  reqs[1].sampling.stop_token_ids = {first.at({1, 1}).tokens[9]};
  reqs[1].sampling.stop_strings = {std::to_string(first.at({1, 2}).tokens[7]) + "][" + std::to_string(first.at({1, 2}).tokens[8])};
  // A second turn over the first's prompt and output: a prefix-cache hit.
  GenerationRequest turn2 = reqs[0];
  turn2.prompt.insert(turn2.prompt.end(), first.at({0, 0}).tokens.begin(), first.at({0, 0}).tokens.begin() + 11);
  turn2.sampling.stop_token_ids.clear();
  reqs.push_back(turn2);
  const Outs plain = run(*m, o, reqs);
  EXPECT_EQ(plain.at({0, 0}).finish, "stop");
  EXPECT_EQ(plain.at({1, 2}).finish, "stop");
  EXPECT_LE(plain.at({1, 2}).tokens.size(), 9u);
  for (Adversary a : {Adversary::Truth, Adversary::Corrupted, Adversary::Random})
    expect_same(plain, run(*m, with_drafter(o, a, V, reqs, plain, 5), reqs), name_of(a));
}

// n-gram drafts from the sequence's own tokens: a prompt that repeats a run, greedy output (a
// random model's greedy text loops, so the n-grams match often).
TEST_F(SpeculativeSynth, NgramDraftsChangeNothingAndAreAccepted) {
  auto m = model("tiny-e");
  const int V = int(m->config.vocab_size);
  auto run_tokens = test::random_tokens(12, V, 8);
  std::vector<int> prompt = run_tokens;
  prompt.insert(prompt.end(), run_tokens.begin(), run_tokens.end());
  const std::vector<GenerationRequest> reqs{request(prompt, 0.0f, 0, 60), request(prompt, 1.0f, 5, 60)};
  EngineOptions o;
  o.max_seqs = 2;
  const Outs plain = run(*m, o, reqs);
  o.speculative.mode = SpecMode::Ngram;
  const Outs spec = run(*m, o, reqs);
  expect_same(plain, spec, "ngram");
  EXPECT_GT(spec.at({0, 0}).spec.accepted, 0);
}

// Requests choose: off on an engine that drafts, ngram on one that does not, draft_k below
// k_max; asking for more than k_max, or for a drafter model the engine lacks, is refused.
TEST_F(SpeculativeSynth, PerRequestChoiceAndRefusals) {
  auto m = model("tiny-e");
  const int V = int(m->config.vocab_size);
  GenerationRequest r = request(test::random_tokens(6, V, 9), 0.0f, 0, 30);
  EngineOptions o;
  o.speculative.k_max = 4;
  Engine eng(*m, o);
  r.draft_k = 5;
  EXPECT_THROW(eng.submit(r, [](const GenerationEvent&) {}), Error);
  r.draft_k = 0;
  r.speculative = SpecMode::Draft;
  EXPECT_THROW(eng.submit(r, [](const GenerationEvent&) {}), Error);
  r.speculative = SpecMode::Ngram;
  r.draft_k = 2;
  const Outs plain = run(*m, o, {request(r.prompt, 0.0f, 0, 30)});
  const Outs spec = run(*m, o, {r});
  expect_same(plain, spec, "per-request ngram");
  for (int64_t d : spec.at({0, 0}).spec.drafted_at) EXPECT_GE(d, 0);
  EXPECT_LE(spec.at({0, 0}).spec.drafted_at.size(), 2u);
  o.speculative.mode = SpecMode::Ngram;
  r.speculative = SpecMode::Off;
  const Outs off = run(*m, o, {r});
  EXPECT_EQ(off.at({0, 0}).spec.verify_steps, 0);
}

// Top-k probabilities of one logits row at temperature 1, in double: token -> p.
std::map<int, double> top_k_probs(const float* l, int V, int k) {
  std::vector<int> idx(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) idx[size_t(i)] = i;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return l[a] > l[b]; });
  double z = 0;
  for (int i = 0; i < k; ++i) z += std::exp(double(l[idx[size_t(i)]]) - double(l[idx[0]]));
  std::map<int, double> p;
  for (int i = 0; i < k; ++i) p[idx[size_t(i)]] = std::exp(double(l[idx[size_t(i)]]) - double(l[idx[0]])) / z;
  return p;
}

// Sampling under speculation draws from the target's distribution: 3000 seeded three-token
// continuations (top-k 2, temperature 1); after the first token a drafter proposes the likeliest
// second one (accepted about as often as it is right: both the accepted and the rejected path
// occur), against the exact joint distribution of the three tokens computed from the f32
// reference (chi-square, 7 degrees of freedom, p = 0.001 threshold 24.3).
TEST_F(SpeculativeSynth, SampledTriplesFollowTheTargetsJointDistribution) {
  auto m = model("tiny-e");
  const int V = int(m->config.vocab_size);
  const std::vector<int> prompt = test::random_tokens(6, V, 77);
  auto next_probs = [&](const std::vector<int>& ctx) {
    const auto l = forward_reference(*m, ctx);
    return top_k_probs(&l[(ctx.size() - 1) * size_t(V)], V, 2);
  };
  std::map<std::vector<int>, double> joint;
  std::map<int, int> likeliest_after;  // t1 -> the likeliest t2
  for (const auto& [t1, q1] : next_probs(prompt)) {
    auto c1 = prompt;
    c1.push_back(t1);
    const auto p2 = next_probs(c1);
    likeliest_after[t1] = std::max_element(p2.begin(), p2.end(), [](auto& x, auto& y) { return x.second < y.second; })->first;
    for (const auto& [t2, q2] : p2) {
      auto c2 = c1;
      c2.push_back(t2);
      for (const auto& [t3, q3] : next_probs(c2)) joint[{t1, t2, t3}] = q1 * q2 * q3;
    }
  }
  class Likeliest : public Drafter {
   public:
    explicit Likeliest(std::map<int, int> m) : m_(std::move(m)) {}
    std::vector<int> propose(const DraftContext& c, int) override { return {m_.at(c.pending)}; }
    std::string name() const override { return "likeliest"; }

   private:
    std::map<int, int> m_;
  };
  EngineOptions o;
  o.max_seqs = 16;
  o.speculative.mode = SpecMode::Draft;
  o.speculative.make_drafter = [likeliest_after](const GenerationRequest&, int) {
    return std::make_unique<Likeliest>(likeliest_after);
  };
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int n = 600;
#else
  const int n = 3000;
#endif
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    reqs.push_back(request(prompt, 1.0f, uint64_t(i), 3));
    reqs.back().sampling.top_k = 2;
    reqs.back().sampling.logprobs = false;
    reqs.back().sampling.top_logprobs = 0;
  }
  const Outs out = run(*m, o, reqs);
  std::map<std::vector<int>, int> counts;
  int64_t drafted = 0, accepted = 0;
  for (const auto& [key, c] : out) {
    ASSERT_EQ(c.tokens.size(), 3u);
    ++counts[c.tokens];
    drafted += c.spec.drafted;
    accepted += c.spec.accepted;
  }
  double chi2 = 0;
  for (const auto& [triple, q] : joint) {
    const double expected = q * n, got = counts.count(triple) ? counts[triple] : 0;
    chi2 += (got - expected) * (got - expected) / expected;
  }
  for (const auto& [triple, c] : counts) EXPECT_TRUE(joint.count(triple)) << "sampled outside the top-k support";
  EXPECT_LT(chi2, 24.3);
  EXPECT_EQ(drafted, n);                 // one draft per continuation
  EXPECT_GT(accepted, n / 10);           // accepted often
  EXPECT_LT(accepted, n - n / 10);       // and rejected often
}

// The Gemma 4 assistant drafter (the fixtures' tiny pairs: a centroid head and a dense head) as
// the draft source: plain decoding's output, greedy and seeded, on the reference loops and the
// SIMD kernels; with p_min 0 it drafts every step, with p_min above 1 never.
TEST(SpeculativeAssistant, TheDrafterModelChangesNothing) {
  for (const char* v : {"tiny-e-assistant", "tiny-31b-assistant"}) {
    const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / v;
    auto target = load_model(dir / "target");
    auto assistant = load_assistant(dir / "assistant", *target);
    const int V = int(target->config.vocab_size);
    std::vector<GenerationRequest> reqs{request(test::random_tokens(7, V, 21), 0.0f, 0, 40),
                                        request(test::random_tokens(9, V, 22), 1.0f, 4, 40)};
    for (int threads : {0, 2}) {
      EngineOptions o;
      o.max_seqs = 2;
      o.threads = threads;
      o.min_matmul_input = assistant->config.widest_matmul_input();
      const Outs plain = run(*target, o, reqs);
      for (float p_min : {0.0f, 1.5f}) {
        EngineOptions d = o;
        d.speculative.mode = SpecMode::Draft;
        d.speculative.make_drafter = [&, p_min](const GenerationRequest&, int) {
          return std::make_unique<AssistantDrafter>(*assistant, *target, p_min);
        };
        const Outs spec = run(*target, d, reqs);
        expect_same(plain, spec, std::string(v) + " threads " + std::to_string(threads));
        int64_t drafted = 0;
        for (const auto& [key, s] : spec) drafted += s.spec.drafted;
        if (p_min == 0.0f) {
          EXPECT_GT(drafted, 0) << v;  // (adaptive k pauses a drafter that keeps missing)
        } else {
          EXPECT_EQ(drafted, 0) << v;
        }
      }
    }
  }
}

// What the engine hands a drafter model, checked at every proposal against an independent run:
// the pending token sits at `position` = the tokens fed so far, and `hidden` is the target's
// final-normed row that chose it, the same bits as one forward pass over those tokens gives
// (after prefills, verify steps with rollbacks, and forks of n = 2 choices).
TEST(SpeculativeAssistant, DrafterSeesThePendingTokensPositionAndHiddenRow) {
  const auto dir = test::fixtures_dir() / "gemma4-assistant-tiny" / "tiny-e-assistant";
  auto target = load_model(dir / "target");
  auto assistant = load_assistant(dir / "assistant", *target);
  struct Checking : Drafter {
    const Model* m;
    std::unique_ptr<Drafter> inner;
    int* checked;
    std::vector<int> propose(const DraftContext& c, int k) override {
      std::vector<int> fed(c.prompt.begin(), c.prompt.end());
      fed.insert(fed.end(), c.generated.begin(), c.generated.end());
      EXPECT_EQ(c.kv->length(c.kv_seq), int64_t(fed.size()));  // the pending token is next
      DenseKvStore kv(m->config);
      const int seq = kv.add_sequence();
      std::vector<BatchRow> rows;
      for (size_t i = 0; i < fed.size(); ++i) rows.push_back({seq, int64_t(i), fed[i], i + 1 == fed.size()});
      std::vector<float> logits, hidden;
      forward_cached(*m, rows, kv, {}, logits, &hidden);
      EXPECT_EQ(c.hidden.size(), hidden.size());
      if (c.hidden.size() == hidden.size()) {
        EXPECT_EQ(std::memcmp(c.hidden.data(), hidden.data(), hidden.size() * sizeof(float)), 0) << "at " << fed.size();
      }
      ++*checked;
      return inner->propose(c, k);
    }
    std::string name() const override { return "checking"; }
    bool needs_hidden() const override { return true; }
  };
  int checked = 0;
  EngineOptions o;
  o.max_seqs = 3;
  o.speculative.mode = SpecMode::Draft;
  o.speculative.make_drafter = [&](const GenerationRequest&, int) {
    auto d = std::make_unique<Checking>();
    d->m = target.get();
    d->inner = std::make_unique<AssistantDrafter>(*assistant, *target, 0.0f);
    d->checked = &checked;
    return d;
  };
  std::vector<GenerationRequest> reqs{request(test::random_tokens(7, int(target->config.vocab_size), 31), 1.0f, 2, 30)};
  reqs.push_back(reqs[0]);
  reqs[1].n = 2;
  reqs[1].sampling.seed = 9;
  const Outs spec = run(*target, o, reqs);
  EXPECT_EQ(spec.size(), 3u);
  EXPECT_GT(checked, 10);  // every choice drafted, with pauses after misses
}

// A drafter that never guesses right costs few draft rows: after two empty verifications the
// engine pauses drafting for a doubling number of steps.
TEST(DraftLength, BacksOffWhenNothingIsAccepted) {
  DraftLength d(4);
  int rows = 0;
  for (int step = 0; step < 200; ++step) {
    const int k = d.next();
    rows += k;
    d.observe(k, 0);
  }
  EXPECT_LT(rows, 40);  // 200 steps of 4 drafts would be 800 rows
  DraftLength unsure(4);  // a drafter model that keeps proposing nothing is asked rarely
  int asked = 0;
  for (int step = 0; step < 200; ++step)
    if (unsure.next() > 0) ++asked, unsure.observe_unsure();
  EXPECT_LT(asked, 20);
  DraftLength full(4);
  for (int step = 0; step < 10; ++step) full.observe(full.next(), full.next() > 0 ? full.next() : 0);
  EXPECT_EQ(full.next(), 4);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestOccurrence) {
  NgramDrafter d(3, 2);
  const std::vector<int> prompt = {1, 2, 3, 4, 5, 9, 2, 3, 7, 8};
  const std::vector<int> gen = {1};
  // sequence ... 8, 1, then pending 2: suffix {1, 2} occurred at the start, followed by 3, 4, 5.
  EXPECT_EQ(d.propose({prompt, gen, 2}, 3), (std::vector<int>{3, 4, 5}));
  // suffix {9, 2, 3}: the 3-gram first; k caps the proposal.
  const std::vector<int> gen2 = {9, 2}, none;
  EXPECT_EQ(d.propose({prompt, gen2, 3}, 1), (std::vector<int>{7}));
  EXPECT_TRUE(d.propose({prompt, none, 42}, 4).empty());  // no earlier occurrence
}

}  // namespace speculative_test
}  // namespace g4
