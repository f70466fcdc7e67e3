// DegeneracyGuard: a streaming check that a generated sequence is not broken output.
//
// Broken engines (a ring cache indexed by padded positions, a wrong norm, a bad dtype) rarely
// crash: they emit fluent-looking loops with HTTP 200 (docs/lessons.md, 4). The guard watches
// every generated token, O(1) work per token and a fixed amount of state (the prompt's k-gram
// table aside), and reports the most serious finding with its evidence:
//   whitespace_collapse    the output turns into a long run of whitespace
//   single_char_collapse   ... or into one character repeated
//   token_loop             one token id repeated back to back
//   repeated_ngram         the tail cycles with a period of 2..max_cycle_period tokens, or the
//                          recent window is mostly n-grams seen earlier in it (longer loops,
//                          loops with small variations)
//   prompt_echo            most of the output is the prompt copied back
// Loop findings are latched: a loop anywhere in the output stays in the verdict. Prompt echo is
// judged over the whole output so far (quoting the question before answering it is fine).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace g4 {

enum class DegeneracyKind { ok, whitespace_collapse, single_char_collapse, token_loop, repeated_ngram, prompt_echo };
std::string_view degeneracy_kind_name(DegeneracyKind kind);  // "ok", "token_loop", ...

struct DegeneracyVerdict {
  DegeneracyKind kind = DegeneracyKind::ok;
  int64_t span_start = 0;  // generated-token indices [span_start, span_end) the evidence covers
  int64_t span_end = 0;
  int n = 0;               // cycle period / n-gram length / echo k-gram length; 1 for runs
  int64_t repeats = 0;     // times the unit repeats (token or character run length; repeated n-grams)
  double fraction = 0;     // share of the output (or of the n-gram window) the evidence covers
  std::string detail;      // one human-readable sentence
  bool degenerate() const { return kind != DegeneracyKind::ok; }
};

// {"kind", "degenerate", "span": [start, end], "n", "repeats", "fraction", "detail"}
void to_json(nlohmann::json& out, const DegeneracyVerdict& verdict);

// Thresholds. They are absolute lengths, not rates, so a short output is never flagged for a
// couple of repeats, and they only look at *contiguous* repetition or at a large share of a long
// window, so natural text repeating "the" or a phrase now and then is never flagged.
struct DegeneracyLimits {
  // A token repeated back to back. 20 leaves room for legitimate digit runs (Gemma splits numbers
  // into single digits: a 64-bit zero in hex is 16 zeros).
  int token_loop_run = 20;
  // A tail cycle of period p in [2, max_cycle_period] must repeat this often AND cover this many
  // tokens: a 5-gram x10 (50 tokens) is flagged, "1,000,000,000,000,000,000" (period 4, 24 tokens)
  // or a short zero-filled array is not.
  int cycle_min_repeats = 6;
  int cycle_min_tokens = 32;
  int max_cycle_period = 64;  // 64 compares per token; longer loops are caught by the window below
  // Windowed n-gram repetition: in the last ngram_window n-grams, the share that already occurred
  // earlier in the window. Prose sits near 0, real code well under 0.3; a paragraph looping three
  // times gives ~0.67. A single verbatim re-quote of a block (~0.5) stays under the bar.
  int ngram_n = 8;
  int ngram_window = 1024;
  int ngram_min_grams = 128;
  double ngram_repeat_fraction = 0.6;
  // Whitespace: deep indentation plus blank lines stays under ~50 characters; 24 whitespace-only
  // tokens in a row never happen in formatted text.
  int whitespace_run_chars = 96;
  int whitespace_run_tokens = 24;
  // One non-space character repeated: separator lines ("=====", 80 to 120 wide) stay under it.
  int single_char_run = 160;
  // Prompt echo (k-grams of ngram_n tokens found in the prompt): at least this many output tokens
  // and this share of the whole output. A code fix that repeats the code plus an explanation
  // stays under 0.8; an engine echoing its input sits near 1.
  int echo_min_tokens = 32;
  double echo_fraction = 0.8;
  // loop_certain(): the tail is a loop right now and far past anything natural. A real loop runs
  // to max_tokens (often thousands), so waiting this long costs little and risks nothing.
  int certain_token_run = 64;
  int certain_cycle_repeats = 8;
  int certain_cycle_tokens = 128;
  int certain_text_run_chars = 512;
};

class DegeneracyGuard {
 public:
  // prompt_tokens: for echo detection (may be empty). Throws g4::Error for nonsensical limits.
  explicit DegeneracyGuard(std::span<const int> prompt_tokens = {}, const DegeneracyLimits& limits = {});

  // One generated token; text_piece is its decoded text when known (the text checks need it;
  // pieces may split a UTF-8 character).
  void observe(int token_id, std::string_view text_piece);
  void observe(int token_id);

  DegeneracyVerdict verdict() const;                  // most serious finding, or kind ok
  std::vector<DegeneracyVerdict> findings() const;    // one per kind found, most serious first
  bool loop_certain() const { return loop_certain_; } // for the optional stop policy

  int64_t tokens_observed() const { return tokens_; }
  // Bytes of state held. Fixed by the limits and the prompt length; never grows with the output.
  size_t state_bytes() const;

 private:
  struct Found {
    bool found = false;
    DegeneracyVerdict verdict;  // detail filled in by findings(), not per token
    uint32_t unit = 0;          // the looping token id or character
  };
  void observe_cycles(int token_id);
  void observe_ngrams();
  void observe_text(std::string_view piece);
  void on_code_point(uint32_t cp);
  int token_back(int distance) const;  // token generated `distance` steps before the latest

  DegeneracyLimits limits_;
  int64_t tokens_ = 0;
  bool loop_certain_ = false;

  std::vector<int> recent_tokens_;        // ring of the last max(max_cycle_period, ngram_n) + 1 ids
  std::vector<int64_t> period_matches_;   // [p]: trailing run of token[i] == token[i - p]

  std::vector<uint64_t> window_hashes_;   // ring [ngram_window] of n-gram hashes
  std::unordered_map<uint64_t, uint32_t> window_counts_;  // hash -> occurrences in the window

  std::vector<uint64_t> prompt_grams_;    // sorted hashes of the prompt's n-grams
  int64_t echo_covered_ = 0;              // output tokens inside some n-gram found in the prompt
  int64_t echo_covered_end_ = 0;          // end of the last covered span (token index)
  int64_t echo_run_start_ = -1;           // current run of consecutive matching n-grams
  int64_t echo_best_start_ = 0, echo_best_end_ = 0;

  // Text state.
  uint32_t utf8_cp_ = 0;
  int utf8_need_ = 0;
  int64_t chars_ = 0;
  uint32_t run_cp_ = 0;
  int64_t run_chars_ = 0, run_start_token_ = 0;
  int64_t ws_chars_ = 0, ws_start_token_ = 0;
  int64_t ws_tokens_ = 0;
  int64_t piece_code_points_ = 0;
  bool piece_has_non_ws_ = false;

  Found whitespace_, single_char_, token_loop_, cycle_, window_;
};

}  // namespace g4
