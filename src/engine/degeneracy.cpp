#include "engine/degeneracy.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "platform/error.h"

namespace g4 {

namespace {

uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Order-sensitive hash of n token ids; 64 bits make collisions irrelevant at these counts.
template <typename TokenAt>
uint64_t hash_tokens(int n, TokenAt token_at) {
  uint64_t h = 0x6a09e667f3bcc908ull;
  for (int i = 0; i < n; ++i) h = mix64(h + 0x9e3779b97f4a7c15ull + uint32_t(token_at(i)));
  return h;
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string span_text(const DegeneracyVerdict& v) {
  return "tokens [" + std::to_string(v.span_start) + ", " + std::to_string(v.span_end) + ")";
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", f * 100);
  return buf;
}

std::string describe_char(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  std::string out = buf;
  if (cp >= 0x21 && cp < 0x7F) out += std::string(" '") + char(cp) + "'";
  return out;
}

constexpr uint32_t kReplacementChar = 0xFFFD;

}  // namespace

std::string_view degeneracy_kind_name(DegeneracyKind kind) {
  switch (kind) {
    case DegeneracyKind::ok: return "ok";
    case DegeneracyKind::whitespace_collapse: return "whitespace_collapse";
    case DegeneracyKind::single_char_collapse: return "single_char_collapse";
    case DegeneracyKind::token_loop: return "token_loop";
    case DegeneracyKind::repeated_ngram: return "repeated_ngram";
    case DegeneracyKind::prompt_echo: return "prompt_echo";
  }
  return "unknown";
}

void to_json(nlohmann::json& out, const DegeneracyVerdict& v) {
  out = nlohmann::json{{"kind", std::string(degeneracy_kind_name(v.kind))},
                       {"degenerate", v.degenerate()},
                       {"span", {v.span_start, v.span_end}},
                       {"n", v.n},
                       {"repeats", v.repeats},
                       {"fraction", v.fraction},
                       {"detail", v.detail}};
}

DegeneracyGuard::DegeneracyGuard(std::span<const int> prompt_tokens, const DegeneracyLimits& limits)
    : limits_(limits) {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error("degeneracy limits: " + what);
  };
  require(limits.max_cycle_period >= 2 && limits.max_cycle_period <= 4096,
          "max_cycle_period = " + std::to_string(limits.max_cycle_period) + " must be in [2, 4096]");
  require(limits.ngram_n >= 1 && limits.ngram_n <= 64, "ngram_n = " + std::to_string(limits.ngram_n) + " must be in [1, 64]");
  require(limits.ngram_window >= 1, "ngram_window = " + std::to_string(limits.ngram_window) + " must be >= 1");
  require(limits.token_loop_run >= 2 && limits.cycle_min_repeats >= 2 && limits.certain_token_run >= 2 &&
              limits.certain_cycle_repeats >= 2,
          "run and repeat thresholds must be >= 2");

  recent_tokens_.assign(size_t(std::max(limits.max_cycle_period, limits.ngram_n) + 1), 0);
  period_matches_.assign(size_t(limits.max_cycle_period) + 1, 0);
  window_hashes_.assign(size_t(limits.ngram_window), 0);
  window_counts_.reserve(size_t(limits.ngram_window) + 1);

  const int n = limits.ngram_n;
  if (prompt_tokens.size() >= size_t(n)) {
    prompt_grams_.reserve(prompt_tokens.size() - size_t(n) + 1);
    for (size_t end = size_t(n); end <= prompt_tokens.size(); ++end)
      prompt_grams_.push_back(hash_tokens(n, [&](int i) { return prompt_tokens[end - size_t(n) + size_t(i)]; }));
    std::sort(prompt_grams_.begin(), prompt_grams_.end());
    prompt_grams_.erase(std::unique(prompt_grams_.begin(), prompt_grams_.end()), prompt_grams_.end());
    prompt_grams_.shrink_to_fit();
  }
}

int DegeneracyGuard::token_back(int distance) const {
  const int64_t ring = int64_t(recent_tokens_.size());
  return recent_tokens_[size_t((tokens_ - 1 - distance) % ring)];
}

void DegeneracyGuard::observe(int token_id) { observe(token_id, {}); }

void DegeneracyGuard::observe(int token_id, std::string_view text_piece) {
  ++tokens_;
  recent_tokens_[size_t((tokens_ - 1) % int64_t(recent_tokens_.size()))] = token_id;
  loop_certain_ = false;
  observe_cycles(token_id);
  observe_ngrams();
  if (!text_piece.empty()) observe_text(text_piece);
  if (ws_chars_ >= limits_.certain_text_run_chars || run_chars_ >= limits_.certain_text_run_chars)
    loop_certain_ = true;
}

void DegeneracyGuard::observe_cycles(int token_id) {
  const int64_t end = tokens_;  // span end (exclusive) of anything found now
  bool flagged = false;
  for (int p = 1; p <= limits_.max_cycle_period; ++p) {
    int64_t& matches = period_matches_[size_t(p)];
    if (end - 1 < p) { matches = 0; continue; }
    matches = token_back(p) == token_id ? matches + 1 : 0;
    if (matches == 0) continue;
    const int64_t covered = matches + p;  // tokens in the periodic tail
    const int64_t repeats = covered / p;
    if (p == 1) {
      if (covered >= limits_.certain_token_run) loop_certain_ = true;
      if (covered >= limits_.token_loop_run) {
        flagged = true;
        if (!token_loop_.found || covered > token_loop_.verdict.repeats) {
          token_loop_ = {true, {DegeneracyKind::token_loop, end - covered, end, 1, covered, double(covered) / double(end), ""}, uint32_t(token_id)};
        }
      }
      continue;
    }
    if (repeats >= limits_.certain_cycle_repeats && covered >= limits_.certain_cycle_tokens) loop_certain_ = true;
    // Report only the smallest period that qualifies: multiples of it cover the same tail.
    if (!flagged && repeats >= limits_.cycle_min_repeats && covered >= limits_.cycle_min_tokens) {
      flagged = true;
      const int64_t best = cycle_.found ? cycle_.verdict.span_end - cycle_.verdict.span_start : 0;
      if (covered > best)
        cycle_ = {true, {DegeneracyKind::repeated_ngram, end - covered, end, p, repeats, double(covered) / double(end), ""}, 0};
    }
  }
}

void DegeneracyGuard::observe_ngrams() {
  const int n = limits_.ngram_n;
  if (tokens_ < n) return;
  const uint64_t h = hash_tokens(n, [&](int i) { return token_back(n - 1 - i); });
  const int64_t gram = tokens_ - n;  // index of this n-gram among all n-grams of the output
  const int64_t window = limits_.ngram_window;
  uint64_t& slot = window_hashes_[size_t(gram % window)];
  if (gram >= window) {
    auto it = window_counts_.find(slot);
    if (it != window_counts_.end() && --it->second == 0) window_counts_.erase(it);
  }
  slot = h;
  ++window_counts_[h];

  const int64_t total = std::min(gram + 1, window);
  if (total >= limits_.ngram_min_grams) {
    const int64_t distinct = int64_t(window_counts_.size());
    const double repeated = 1.0 - double(distinct) / double(total);
    if (repeated >= limits_.ngram_repeat_fraction && (!window_.found || repeated > window_.verdict.fraction))
      window_ = {true, {DegeneracyKind::repeated_ngram, tokens_ - (total + n - 1), tokens_, n, total - distinct, repeated, ""}, 0};
  }

  if (!prompt_grams_.empty()) {
    if (std::binary_search(prompt_grams_.begin(), prompt_grams_.end(), h)) {
      echo_covered_ += tokens_ - std::max(echo_covered_end_, tokens_ - n);
      echo_covered_end_ = tokens_;
      if (echo_run_start_ < 0) echo_run_start_ = tokens_ - n;
      if (tokens_ - echo_run_start_ > echo_best_end_ - echo_best_start_) {
        echo_best_start_ = echo_run_start_;
        echo_best_end_ = tokens_;
      }
    } else {
      echo_run_start_ = -1;
    }
  }
}

void DegeneracyGuard::observe_text(std::string_view piece) {
  piece_code_points_ = 0;
  piece_has_non_ws_ = false;
  for (unsigned char b : piece) {
    if (utf8_need_ > 0) {
      if ((b & 0xC0) == 0x80) {
        utf8_cp_ = (utf8_cp_ << 6) | (b & 0x3Fu);
        if (--utf8_need_ == 0) on_code_point(utf8_cp_);
        continue;
      }
      utf8_need_ = 0;
      on_code_point(kReplacementChar);  // truncated sequence; b starts afresh below
    }
    if (b < 0x80) on_code_point(b);
    else if ((b >> 5) == 0x6) { utf8_cp_ = b & 0x1Fu; utf8_need_ = 1; }
    else if ((b >> 4) == 0xE) { utf8_cp_ = b & 0x0Fu; utf8_need_ = 2; }
    else if ((b >> 3) == 0x1E) { utf8_cp_ = b & 0x07u; utf8_need_ = 3; }
    else on_code_point(kReplacementChar);
  }
  if (piece_code_points_ == 0) return;  // only part of a character so far: no verdict on the token
  if (piece_has_non_ws_) {
    ws_tokens_ = 0;
    return;
  }
  ++ws_tokens_;
  if (ws_tokens_ >= limits_.whitespace_run_tokens || ws_chars_ >= limits_.whitespace_run_chars) {
    if (!whitespace_.found || ws_chars_ > whitespace_.verdict.repeats)
      whitespace_ = {true, {DegeneracyKind::whitespace_collapse, ws_start_token_, tokens_, 1, ws_chars_, double(ws_chars_) / double(chars_), ""}, 0};
  }
}

void DegeneracyGuard::on_code_point(uint32_t cp) {
  ++chars_;
  ++piece_code_points_;
  const int64_t token = tokens_ - 1;
  if (is_whitespace(cp)) {
    if (ws_chars_ == 0) ws_start_token_ = token;
    ++ws_chars_;
    run_chars_ = 0;  // whitespace is not part of a one-character run
    return;
  }
  piece_has_non_ws_ = true;
  ws_chars_ = 0;
  if (run_chars_ > 0 && cp == run_cp_) {
    ++run_chars_;
  } else {
    run_cp_ = cp;
    run_chars_ = 1;
    run_start_token_ = token;
  }
  if (run_chars_ >= limits_.single_char_run && (!single_char_.found || run_chars_ > single_char_.verdict.repeats))
    single_char_ = {true, {DegeneracyKind::single_char_collapse, run_start_token_, tokens_, 1, run_chars_, double(run_chars_) / double(chars_), ""}, cp};
}

std::vector<DegeneracyVerdict> DegeneracyGuard::findings() const {
  std::vector<DegeneracyVerdict> out;
  if (whitespace_.found) {
    DegeneracyVerdict v = whitespace_.verdict;
    v.detail = "whitespace run of " + std::to_string(v.repeats) + " characters over " + span_text(v);
    out.push_back(std::move(v));
  }
  if (single_char_.found) {
    DegeneracyVerdict v = single_char_.verdict;
    v.detail = "character " + describe_char(single_char_.unit) + " repeated " + std::to_string(v.repeats) +
               " times over " + span_text(v);
    out.push_back(std::move(v));
  }
  if (token_loop_.found) {
    DegeneracyVerdict v = token_loop_.verdict;
    v.detail = "token " + std::to_string(int(token_loop_.unit)) + " repeated " + std::to_string(v.repeats) +
               " times in a row at " + span_text(v);
    out.push_back(std::move(v));
  }
  if (cycle_.found) {  // the exact cycle is the sharper evidence when both exist
    DegeneracyVerdict v = cycle_.verdict;
    v.detail = "a " + std::to_string(v.n) + "-token cycle repeated " + std::to_string(v.repeats) +
               " times covering " + span_text(v);
    out.push_back(std::move(v));
  } else if (window_.found) {
    DegeneracyVerdict v = window_.verdict;
    v.detail = percent(v.fraction) + " of the " + std::to_string(v.n) + "-grams in " + span_text(v) +
               " repeat earlier ones (" + std::to_string(v.repeats) + " repeats)";
    out.push_back(std::move(v));
  }
  if (tokens_ > 0 && echo_covered_ >= limits_.echo_min_tokens &&
      double(echo_covered_) / double(tokens_) >= limits_.echo_fraction) {
    DegeneracyVerdict v{DegeneracyKind::prompt_echo, echo_best_start_, echo_best_end_, limits_.ngram_n,
                        echo_covered_, double(echo_covered_) / double(tokens_), ""};
    v.detail = std::to_string(echo_covered_) + " of " + std::to_string(tokens_) + " output tokens (" +
               percent(v.fraction) + ") copy the prompt; longest copied run " + span_text(v);
    out.push_back(std::move(v));
  }
  return out;
}

DegeneracyVerdict DegeneracyGuard::verdict() const {
  std::vector<DegeneracyVerdict> all = findings();
  if (all.empty()) {
    DegeneracyVerdict ok;
    ok.span_end = tokens_;
    ok.detail = "no degeneracy in " + std::to_string(tokens_) + " tokens";
    return ok;
  }
  return std::move(all.front());
}

size_t DegeneracyGuard::state_bytes() const {
  constexpr size_t kMapNodeBytes = sizeof(std::pair<const uint64_t, uint32_t>) + 2 * sizeof(void*);
  return sizeof(*this) + recent_tokens_.capacity() * sizeof(int) + period_matches_.capacity() * sizeof(int64_t) +
         window_hashes_.capacity() * sizeof(uint64_t) + window_counts_.bucket_count() * sizeof(void*) +
         window_counts_.size() * kMapNodeBytes + prompt_grams_.capacity() * sizeof(uint64_t);
}

}  // namespace g4
