// Decode attention on one thread: one query row of G = 8 heads sharing one kv head (E2B's GQA
// group) against n cached positions in the cache's element type, for the head dims of E2B's
// sliding (256) and full (512) layers. `caches` distinct caches are visited in turn, so with
// several the keys and values come from memory rather than from a warm cache, as in a decode
// step that walks 35 layers. Reported as key positions per second, multiply-adds per second
// (q·k and p·v) and K/V bytes read per second.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/attention_bf16.h"
#include "ops/attention_kernels.h"
#include "platform/dtype.h"
#include "platform/huge_pages.h"

namespace g4 {
namespace {

// state.range(0): positions; range(1): 0 f32 cache, 1 bf16 cache (f32 kernel), 2 bf16 cache on the
// bf16 kernel (attention_bf16.h); range(2): head dim; range(3): caches.
void BM_AttendDecode(benchmark::State& state) {
  const int64_t n = state.range(0), G = 8, hd = state.range(2), caches = state.range(3);
  const bool bf16 = state.range(1) >= 1, bf16_kernel = state.range(1) == 2;
  if (bf16_kernel && !ops::attention_bf16_available()) {
    state.SkipWithError("no confirmed AVX512_BF16 on this CPU");
    return;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> q(size_t(G * hd));
  for (auto& x : q) x = g(rng);
  const size_t elems = size_t(n * hd);
  // In 2 MiB pages, as the engine's KV cache (kv_rows.h).
  const uint64_t bytes = elems * uint64_t(caches) * (bf16 ? 2 : 4);
  HugePageBuffer kbuf(bytes), vbuf(bytes);
  auto* kf = reinterpret_cast<float*>(kbuf.data());
  auto* vf = reinterpret_cast<float*>(vbuf.data());
  auto* kb = reinterpret_cast<uint16_t*>(kbuf.data());
  auto* vb = reinterpret_cast<uint16_t*>(vbuf.data());
  for (size_t i = 0; i < elems * size_t(caches); ++i) {
    if (bf16) {
      kb[i] = f32_to_bf16(g(rng));
      vb[i] = f32_to_bf16(g(rng));
    } else {
      kf[i] = g(rng);
      vf[i] = g(rng);
    }
  }
  std::vector<ops::KvSpan> spans;
  for (int64_t c = 0; c < caches; ++c)
    spans.push_back({bf16 ? ops::KvElem::BF16 : ops::KvElem::F32, n,
                     bf16 ? static_cast<const void*>(kb + size_t(c) * elems) : kf + size_t(c) * elems,
                     bf16 ? static_cast<const void*>(vb + size_t(c) * elems) : vf + size_t(c) * elems,
                     nullptr, nullptr});
  std::vector<float> o(static_cast<size_t>(G * hd)), m(static_cast<size_t>(G)), l(static_cast<size_t>(G));
  int64_t c = 0;
  for (auto _ : state) {
    const ops::KvSpans ks{&spans[size_t(c)], 1, 1, hd};
    if (bf16_kernel)
      ops::attend_partial_bf16(q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    else
      ops::attend_partial(q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    benchmark::DoNotOptimize(o.data());
    c = (c + 1) % caches;
  }
  const double it = double(state.iterations());
  state.counters["positions/s"] = benchmark::Counter(it * double(n), benchmark::Counter::kIsRate);
  state.counters["MAC/s"] = benchmark::Counter(it * double(n * G * hd * 2), benchmark::Counter::kIsRate);
  state.counters["KV bytes/s"] =
      benchmark::Counter(it * double(n * hd * 2 * (bf16 ? 2 : 4)), benchmark::Counter::kIsRate);
}
// Warm (one cache) and from memory (16 caches: 64-256 MiB) at a sliding layer's window and at depth 4096.
BENCHMARK(BM_AttendDecode)
    ->ArgsProduct({{512, 4096}, {0, 1, 2}, {256, 512}, {1, 16}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace g4
