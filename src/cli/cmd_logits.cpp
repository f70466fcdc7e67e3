// g4 logits: one forward pass over a token sequence, logits written as raw f32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "cli/args.h"
#include "cli/command.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/model.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

const char* kUsage =
    "usage: g4 logits --model DIR --tokens 5,17,... [--out FILE] [--mode full|incremental|chunked]\n"
    "                 [--chunk N] [--kv f32|f16|bf16|int8]\n\n"
    "Runs the forward pass over the sequence (positions from 0, no BOS added) and prints the top-5\n"
    "of the last row. --mode full (default): the f32 reference over the whole sequence at once;\n"
    "incremental: one token at a time through the KV cache; chunked: --chunk tokens per step\n"
    "(default 64). All modes give the same logits (f32 KV).\n\n"
    "  --model DIR     Hugging Face checkpoint directory (config.json + safetensors) or a .gguf file\n"
    "  --tokens LIST   comma-separated token ids\n"
    "  --out FILE      write float32 little-endian logits of shape [T, vocab]; row i = logits after token i";

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--model", "--tokens", "--out", "--mode", "--chunk", "--kv"}, {});
  const std::string mode = a.get_or("--mode", "full");
  if (mode != "full" && mode != "incremental" && mode != "chunked")
    throw Error("--mode '" + mode + "': expected full, incremental or chunked");
  const long long chunk = mode == "incremental" ? 1 : a.get_int("--chunk", 64);
  if (chunk < 1) throw Error("--chunk must be >= 1");
  const auto tokens = parse_int_list(a.require("--tokens"), "--tokens");
  auto t0 = std::chrono::steady_clock::now();
  auto model = load_model(a.require("--model"));
  auto t1 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  if (mode == "full") {
    logits = forward_reference(*model, tokens);
  } else {
    KvCacheOptions ko;
    ko.dtype = kv_dtype_from_name(a.get_or("--kv", "f32"));
    ko.max_total_tokens = (int64_t(tokens.size()) + ko.block_tokens - 1) / ko.block_tokens * ko.block_tokens;
    KvCache kv(model->config, ko);
    const int seq = kv.add_sequence();
    for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
      std::vector<BatchRow> rows;
      for (size_t t = start; t < std::min(tokens.size(), start + size_t(chunk)); ++t)
        rows.push_back({seq, int64_t(t), tokens[t], true});
      const auto l = forward_cached(*model, rows, kv);
      logits.insert(logits.end(), l.begin(), l.end());
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  const int64_t V = model->config.vocab_size, T = int64_t(tokens.size());
  if (auto out = a.get("--out")) {
    const std::string tmp = *out + ".tmp";
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(*out + ": cannot open for writing");
    f.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
    f.close();
    if (!f) throw Error(*out + ": write failed");
    std::rename(tmp.c_str(), out->c_str());
    std::fprintf(stderr, "wrote %s: [%lld, %lld] float32\n", out->c_str(), (long long)T, (long long)V);
  }
  const float* last = logits.data() + (T - 1) * V;
  std::vector<int> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = int(std::min<int64_t>(5, V));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int x, int y) { return last[x] > last[y]; });
  std::printf("top-%d after token %lld (position %lld):\n", k, (long long)tokens.back(), (long long)(T - 1));
  for (int i = 0; i < k; ++i) std::printf("  %8d  %10.5f\n", idx[size_t(i)], last[idx[size_t(i)]]);
  std::fprintf(stderr, "load %.3f s, forward %.3f s (%lld tokens, %s)\n",
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
               (long long)T, mode == "full" ? "f32 reference, whole sequence" : "through the KV cache");
  return 0;
}

const Registration reg{"logits", "forward pass over a token list, write logits [T, vocab] as f32", kUsage, run};

}  // namespace
}  // namespace g4::cli
