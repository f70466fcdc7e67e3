#include "cli/logits_draft.h"

#include <chrono>
#include <cstdio>

#include "cli/model_arg.h"
#include "model/dense_kv_store.h"
#include "model/assistant_step.h"
#include "model/forward_cached.h"
#include "platform/atomic_file.h"
#include "platform/error.h"

namespace g4::cli {

namespace {

// The flags of g4 logits that pick a path the draft mode does not take.
void refuse_other_paths(const Args& a) {
  for (const char* f : {"--mode", "--chunk", "--kv", "--threads", "--compute", "--weights"})
    if (a.has(f))
      throw Error(std::string(f) + ": --draft-model runs the reference loops through a cache that keeps every position; "
                                   "drop " + f);
}

}  // namespace

int run_logits_draft(const Args& a) {
  refuse_other_paths(a);
  const auto tokens = parse_int_list(a.require("--tokens"), "--tokens");
  const auto starts = parse_int_list(a.require("--draft-at"), "--draft-at");
  const long long k = a.get_int("--draft-k", 4);
  if (k < 1 || k > 64) throw Error("--draft-k " + std::to_string(k) + ": must be in [1, 64]");
  for (int p : starts)
    if (p < 1 || size_t(p) >= tokens.size())
      throw Error("--draft-at " + std::to_string(p) + ": a start needs the target's row p-1 and token p, so 1 <= p < " +
                  std::to_string(tokens.size()) + " (the number of --tokens)");
  const auto t0 = std::chrono::steady_clock::now();
  auto target = load_model(model_arg(a.require("--model")).path);
  auto drafter = load_assistant(a.require("--draft-model"), *target);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<float> out;
  for (int p : starts) {
    // The target over tokens [0, p), its final-normed hidden row p-1; then k steps from tokens[p].
    DenseKvStore kv(target->config);
    const int seq = kv.add_sequence();
    std::vector<BatchRow> rows;
    for (int t = 0; t < p; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == p - 1});
    std::vector<float> logits, hidden;
    forward_cached(*target, rows, kv, {}, logits, &hidden);
    const auto steps = draft(*drafter, *target, kv, seq, p, tokens[size_t(p)], hidden, int(k));
    std::printf("start %d (token %d):", p, tokens[size_t(p)]);
    for (const DraftStep& s : steps) {
      std::printf(" %d", s.token);
      out.insert(out.end(), s.logits.begin(), s.logits.end());
    }
    std::printf("\n");
  }
  const auto t2 = std::chrono::steady_clock::now();
  const long long V = drafter->config.text.vocab_size;
  if (auto path = a.get("--out")) {
    write_file_atomically(*path, std::string_view(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float)));
    std::fprintf(stderr, "wrote %s: [%zu, %lld, %lld] float32\n", path->c_str(), starts.size(), k, V);
  }
  std::fprintf(stderr, "load %.3f s, target + drafts %.3f s (%zu starts, k = %lld, f32 reference loops)\n",
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
               starts.size(), k);
  return 0;
}

}  // namespace g4::cli
