// Decode attention on one thread: one query row of G heads sharing one kv head against n cached
// positions in the cache's element type, as in a full-attention layer of E2B (G = 8, hd = 256).
// Reported as key positions per second and as multiply-adds per second (q·k and p·v).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/attention_kernels.h"
#include "platform/dtype.h"

namespace g4 {
namespace {

// state.range(0): positions; range(1): 0 f32, 1 bf16 cache.
void BM_AttendDecode(benchmark::State& state) {
  const int64_t n = state.range(0), G = 8, hd = 256;
  const bool bf16 = state.range(1) == 1;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> q(size_t(G * hd)), kf(size_t(n * hd)), vf(size_t(n * hd));
  for (auto* vec : {&q, &kf, &vf})
    for (auto& x : *vec) x = g(rng);
  std::vector<uint16_t> kb(kf.size()), vb(vf.size());
  for (size_t i = 0; i < kf.size(); ++i) {
    kb[i] = f32_to_bf16(kf[i]);
    vb[i] = f32_to_bf16(vf[i]);
  }
  ops::KvSpan span{bf16 ? ops::KvElem::BF16 : ops::KvElem::F32, n,
                   bf16 ? static_cast<const void*>(kb.data()) : kf.data(),
                   bf16 ? static_cast<const void*>(vb.data()) : vf.data(), nullptr, nullptr};
  const ops::KvSpans spans{&span, 1, 1, hd};
  std::vector<float> o(static_cast<size_t>(G * hd)), m(static_cast<size_t>(G)), l(static_cast<size_t>(G));
  for (auto _ : state) {
    ops::attend_partial(q.data(), G, spans, 0, 0, n, o.data(), m.data(), l.data());
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["positions/s"] = benchmark::Counter(double(state.iterations() * n), benchmark::Counter::kIsRate);
  state.counters["MAC/s"] = benchmark::Counter(double(state.iterations() * n * G * hd * 2), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttendDecode)->ArgsProduct({{512, 4096}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace g4
