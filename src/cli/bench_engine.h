// g4 bench --streams LIST and --chat-turns N: what the engine (scheduler, batching, prefix cache)
// delivers end to end, on the bench's already loaded and prepared model.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace g4::cli {

struct StreamsResult {
  int streams = 0;
  double aggregate_tok_s = 0;  // tokens decoded by all streams / wall time of the decode phase
  double per_stream_tok_s = 0;
  double inter_token_ms_median = 0, inter_token_ms_p90 = 0;  // per stream, between its tokens
  // The decode phase's steps (each one token of every stream), on average: wall time, and the
  // weight products' and attention's share of it (the rest: norms, sampling, the scheduler).
  int64_t decode_steps = 0;
  double step_ms = 0, products_ms = 0, attention_ms = 0;
};

// N requests of a `prompt_len`-token prompt each, all admitted together, each decoding `gen`
// tokens (stop tokens ignored); the decode phase runs from the last first token to the end.
StreamsResult bench_streams(const Model& model, EngineOptions options, int streams, int64_t prompt_len, int64_t gen);

struct ChatTurn {
  int64_t prompt_tokens = 0, cached_tokens = 0;
  double ttft_s = 0;
};

// A conversation of `turns` turns: a `system_len`-token opening, then each turn adds a
// `message_len`-token message, the engine answers `answer_len` tokens, and the next turn resends
// everything (the answer as generated). With the prefix cache on (options.prefix_cache_bytes)
// each turn prefills only what is new.
std::vector<ChatTurn> bench_chat_turns(const Model& model, EngineOptions options, int turns, int64_t system_len,
                                       int64_t message_len, int64_t answer_len);

}  // namespace g4::cli
