// g4 bench --image FILE / --image-size WxH: the vision tower on the bench's machine. Per image:
// decode and preprocessing, patches and soft tokens, the tower and projector over --repeat runs
// (median and range) split into weight products, attention and the rest, the products against the
// peak of the instruction they issue (measured in the same run), and the time to first token of
// a one-image chat through the engine with a cold prefix cache.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli/args.h"
#include "cli/bench_rig.h"
#include "cli/bench_runs.h"
#include "engine/engine.h"

namespace g4::cli {

struct VisionImageRun {
  std::string source;            // the file, or "synthetic WxH"
  int width = 0, height = 0;     // as decoded (or made)
  int budget = 0;                // soft-token budget (--image-tokens)
  int resized_width = 0, resized_height = 0;
  double decode_ms = 0;          // 0 for a synthetic image
  double preprocess_ms = 0;      // resize, rescale, patches
  int64_t patches = 0, soft_tokens = 0;
  std::vector<TokenTimes> encoder;  // per --repeat run: the tower and projector
  double product_macs = 0;          // the weight products' multiply-adds for this image
  double ttft_s = 0;                // one-image chat, max_tokens 1, cold prefix cache
  double ttft_vision_s = 0;         // of which the engine spent in the tower
  int64_t ttft_prompt_tokens = 0;
};

struct VisionBench {
  std::string tower;              // where the tower came from
  std::string executed;           // the products' kernel, in words
  MacUnit unit = MacUnit::F32Fma;  // the instruction they issue
  double peak_gops = 0;           // its peak on --threads, measured in this run
  std::vector<VisionImageRun> images;
};

// --image or --image-size given.
bool wants_vision_bench(const Args& a);

// Loads the tower (--mmproj, else the model directory's), then times every --image FILE and the
// --image-size WxH synthetic image. `engine` is the engine as the bench runs it (its vision set here).
VisionBench run_vision_bench(const Args& a, BenchRig& rig, EngineOptions engine);

void print_vision_bench(const VisionBench& v);
nlohmann::json vision_bench_json(const VisionBench& v);

}  // namespace g4::cli
